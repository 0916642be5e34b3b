"""Item generators of the geometric tasks: translation, rotation, zooming, translation +
rotation, rotation + rotation and ligand docking.

Each generator is a pure function of complex(es) and a numpy ``Generator``; it builds the
scenes with :func:`misi_agent.scene.scene_from_complex` and the command algebra of
:mod:`misi_agent.camera`, and derives the answer from the same commands that made the
images (answers are never typed by hand). See :mod:`misi_agent.bench.items` for the
sampling rules shared by all tasks.

Decisions of our own for these tasks (**(ours)**):

* zooming: the centroid must stay at least :data:`MIN_ZOOM_DEPTH` Å in front of the camera,
  so the upper end of the 40–60 Å range shrinks for small, close scenes (a scene whose
  camera distance leaves less than 40 Å is not used);
* translation + rotation: f1 is a translation along x or y (d in ±1…4 Å) and f2 a rotation
  (±15…90°); the target complex is framed by itself like the reference;
* rotation + rotation: the two rotations are about different axes; decoy (3) moves the first
  rotation to the third axis, so every option still turns about two different axes;
* docking (OURS["docking_shift"]): the ligand is displaced by a whole number of Å along ±x,
  10–30 Å: the smallest distance at which no displaced ligand atom is drawn within
  :data:`DOCK_CLEARANCE_PX` (+ its ball radius) of a pocket atom in the front view at
  512 px, plus 0–2 Å at random (a complex that needs more than 30 Å is not used); then it is
  rolled about its own centroid by a sampled rotation. All seven images look along the same
  directions (front, left, top as for any scene), but each part is framed by itself: the
  pocket alone and the displaced ligand alone are centred on their own centroid and fit to
  the image (so a small ligand is drawn large enough to read its shape and atom names), and
  the image of both together is framed to fit both. The answer does not depend on framing:
  moves are in Å and rolls turn about the ligand's own centroid.
"""
from __future__ import annotations

import math

import numpy as np

from misi_agent.camera import THREE_VIEWS, VIEW_NAMES, Camera, Command, apply_commands, fit_distance, format_commands, initial_view
from misi_agent.render.base import ATOM_RADIUS_LIGAND
from misi_agent.scene import Scene, scene_from_complex
from misi_agent.structure import Complex
from misi_agent.bench import tasks as T
from misi_agent.bench.items import (
    CHECK_SIZE,
    DECOY_SCHEMES,
    MAX_TRIES,
    ROTATION_AXES,
    ZOOM_RANGE,
    ImageSpec,
    ItemSpec,
    NotApplicable,
    all_distinct,
    decoy_pairs,
    place_options,
    sample_rotation,
    sample_translation,
    sample_zoom,
)

MIN_ZOOM_DEPTH = 10.0  # Å between the camera and the centroid after zooming
DOCK_CLEARANCE_PX = 10.0  # extra screen gap between displaced ligand atoms and pocket atoms
DOCK_EXTRA = 3  # random extra displacement 0..DOCK_EXTRA-1 Å beyond the minimum
DOCK_MIN = int(T.DOCKING_SHIFT_GRID.min_abs)  # Å, OURS["docking_shift"]
DOCK_MAX = int(T.DOCKING_SHIFT_GRID.high)  # Å


VIEW_CAPTIONS = {v: f"{v} view" for v in VIEW_NAMES}


def views(cx: Complex, names=THREE_VIEWS, residues=None) -> list[Scene]:
    """The complex (or the ligand plus ``residues``) in the named canonical views."""
    return [scene_from_complex(cx, v, residues=residues) for v in names]


def view_images(scenes: list[Scene], names, prefix: str = "", caption_prefix: str = "") -> list[ImageSpec]:
    return [ImageSpec(f"{prefix}{v}", s, f"{caption_prefix}{VIEW_CAPTIONS[v]}") for v, s in zip(names, scenes)]


def framed(scene: Scene, view: str = "front") -> Scene:
    """A front-oriented scene (or part of one) centred on its own centroid and fit to the view.

    Front-oriented coordinates differ from the entry's coordinates by a translation only, so
    this frames a part exactly as :func:`scene_from_complex` frames a complex.
    """
    return scene.with_coords(initial_view(scene.coords, view))


def _base(task: str, cx: Complex, images, answer, params, prompt_params, **kw) -> ItemSpec:
    prompt = {"pdb_id": cx.pdb_id.upper()}  # OURS["prompt_no_ligand_code"]: the ligand is found in the pictures
    prompt.update(prompt_params)
    return ItemSpec(task=task, pdb_id=cx.pdb_id, ligand_code=cx.ligand_code, images=images, answer=answer,
                    params=params, prompt_params=prompt, **kw)


# ----------------------------------------------------------------------------- unit tasks


def _unit(task: str, cx: Complex, cmd: Command) -> ItemSpec:
    scenes = views(cx)
    after = scenes[0].apply([cmd])
    images = view_images(scenes, THREE_VIEWS) + [ImageSpec("after", after, "front view after the operation")]
    answer = format_commands([cmd])
    return _base(task, cx, images, answer, {"commands": answer, "axis": cmd.axis, "value": cmd.value}, {})


def translation(cx: Complex, rng: np.random.Generator) -> ItemSpec:
    """T1: three views + the front view after ``move a d`` (a ∈ {x, y}); answer ``move a d``."""
    return _unit("translation", cx, sample_translation(rng))


def rotation(cx: Complex, rng: np.random.Generator) -> ItemSpec:
    """T2: three views + the front view after ``roll a θ`` (a ∈ {x, y, z}); answer ``roll a θ``."""
    return _unit("rotation", cx, sample_rotation(rng))


def max_zoom(cx: Complex) -> int:
    """The largest ``move z`` (≤ 60 Å) that keeps the centroid :data:`MIN_ZOOM_DEPTH` Å in front of the camera."""
    depth = -float(scene_from_complex(cx, "front").centroid[2])
    return min(ZOOM_RANGE[1], int(math.floor(depth - MIN_ZOOM_DEPTH)))


def zoom_eligible(cx: Complex) -> bool:
    return max_zoom(cx) >= ZOOM_RANGE[0]


def zooming(cx: Complex, rng: np.random.Generator) -> ItemSpec:
    """T3: three views + the front view after ``move z d`` with d in 40–60 Å."""
    high = max_zoom(cx)
    if high < ZOOM_RANGE[0]:
        raise NotApplicable(f"{cx.pdb_id}: camera distance leaves no room for a 40 Å zoom")
    item = _unit("zooming", cx, sample_zoom(rng, high))
    item.params["max_zoom"] = high
    return item


# ----------------------------------------------------------------------------- two-step tasks


def _options(target: Scene, truth: tuple[Command, Command], rng: np.random.Generator, avoid_axis_of_f2: bool):
    """Decoys per the three schemes, redrawn until all four option states look different."""
    for _ in range(MAX_TRIES):
        decoys = decoy_pairs(truth[0], truth[1], rng, avoid_axis_of_f2=avoid_axis_of_f2)
        pairs = [truth] + decoys
        states = [apply_commands(target.coords, list(p)) for p in pairs]
        if all_distinct(states):
            return decoys
    return None


def _mc_images(target_front: Scene, truth, decoys, rng) -> tuple[list[ImageSpec], dict, dict, str]:
    options, letter, order = place_options(truth, decoys, rng)
    images, opt_names, opt_params = [], {}, {}
    for k, pair in enumerate(options):
        L = "ABCD"[k]
        name = f"option_{L}"
        images.append(ImageSpec(name, target_front.apply(list(pair)), f"option {L}"))
        opt_names[L] = name
        opt_params[L] = {"commands": format_commands(list(pair)),
                         "scheme": "truth" if order[k] == 0 else DECOY_SCHEMES[order[k] - 1]}
    return images, opt_names, opt_params, letter


def translation_rotation(cx: Complex, target: Complex, rng: np.random.Generator) -> ItemSpec:
    """T5: reference three views + front after f2(f1(·)); target three views; four option images.

    f1 = ``move a d`` (a ∈ {x, y}), f2 = ``roll b θ``; the options apply the true pair or a
    decoy pair to the target's front view.
    """
    ref = views(cx)
    tgt = views(target)
    for _ in range(MAX_TRIES):
        f1, f2 = sample_translation(rng), sample_rotation(rng)
        decoys = _options(tgt[0], (f1, f2), rng, avoid_axis_of_f2=False)
        if decoys is not None:
            break
    else:
        raise NotApplicable(f"{cx.pdb_id}/{target.pdb_id}: no visibly distinct option set")
    opt_images, opt_names, opt_params, letter = _mc_images(tgt[0], (f1, f2), decoys, rng)
    images = (view_images(ref, THREE_VIEWS, "reference_", "reference complex, ")
              + [ImageSpec("reference_after", ref[0].apply([f1, f2]), "reference complex, front view after the operation")]
              + view_images(tgt, THREE_VIEWS, "target_", "target complex, ")
              + opt_images)
    commands = format_commands([f1, f2])
    params = {"commands": commands, "f1": str(f1), "f2": str(f2), "target_pdb_id": target.pdb_id,
              "target_ligand": target.ligand_code, "options": opt_params}
    return _base("translation_rotation", cx, images, letter, params,
                 {"target_pdb_id": target.pdb_id.upper()},
                 options=opt_names, extra_pdb_ids=(target.pdb_id,))


def rotation_rotation(cx: Complex, rng: np.random.Generator) -> ItemSpec:
    """T6: three views + front after r1, r2 (different axes); options apply r1', r2' to image 4's state."""
    ref = views(cx)
    for _ in range(MAX_TRIES):
        r1 = sample_rotation(rng)
        r2 = sample_rotation(rng, tuple(a for a in ROTATION_AXES if a != r1.axis))
        state4 = ref[0].apply([r1, r2])
        decoys = _options(state4, (r1, r2), rng, avoid_axis_of_f2=True)
        if decoys is not None:
            break
    else:
        raise NotApplicable(f"{cx.pdb_id}: no visibly distinct option set")
    opt_images, opt_names, opt_params, letter = _mc_images(state4, (r1, r2), decoys, rng)
    images = (view_images(ref, THREE_VIEWS)
              + [ImageSpec("after", state4, "front view after the operation")] + opt_images)
    commands = format_commands([r1, r2])
    params = {"commands": commands, "r1": str(r1), "r2": str(r2), "options": opt_params}
    return _base("rotation_rotation", cx, images, letter, params, {}, options=opt_names)


# ----------------------------------------------------------------------------- docking


def _overlaps(pocket_xy: np.ndarray, ligand_xy: np.ndarray, ligand_r: np.ndarray) -> bool:
    d = np.linalg.norm(ligand_xy[:, None, :] - pocket_xy[None, :, :], axis=2)
    return bool(np.any(d < (ligand_r + DOCK_CLEARANCE_PX)[:, None]))


def _displaced(front: Scene, shift: float, roll: Command) -> np.ndarray:
    coords = front.coords.copy()
    lig = front.is_ligand
    coords[lig] = apply_commands(coords[lig], [Command("move", "x", shift), roll])
    return coords


def _combined_frame(coords: np.ndarray) -> tuple[np.ndarray, float]:
    """Centre and camera distance that frame ``coords`` (front orientation)."""
    return coords.mean(axis=0), fit_distance(coords)


def _clear(front: Scene, coords: np.ndarray) -> bool:
    center, dist = _combined_frame(coords)
    view = initial_view(coords, "front", center=center, distance=dist)
    cam = Camera(CHECK_SIZE, CHECK_SIZE)
    screen, depth = cam.project(view)
    lig = front.is_ligand
    r = cam.pixel_radius(ATOM_RADIUS_LIGAND, depth[lig])
    return not _overlaps(screen[~lig], screen[lig], r)


def docking(cx: Complex, rng: np.random.Generator) -> ItemSpec:
    """T7: pocket alone (3 views), displaced ligand alone (3 views), both (front).

    The ligand is moved by ``move x s`` and then rolled about its own centre by ``roll a θ``;
    the answer ``roll a −θ, move x −s`` (ligand only, rolls about the ligand centroid) puts it
    back in the pocket.
    """
    front = scene_from_complex(cx, "front")
    lig = front.is_ligand
    roll = sample_rotation(rng)
    sign = float(rng.choice([-1.0, 1.0]))
    for dist in range(DOCK_MIN, DOCK_MAX + 1):
        if _clear(front, _displaced(front, sign * dist, roll)):
            break
    else:
        raise NotApplicable(f"{cx.pdb_id}: ligand cannot be moved clear of the pocket within {DOCK_MAX} Å")
    dist = min(DOCK_MAX, dist + int(rng.integers(0, DOCK_EXTRA)))
    while not _clear(front, _displaced(front, sign * dist, roll)):
        dist += 1  # the framing changes with the displacement; make sure the final one is clear
        if dist > DOCK_MAX:
            raise NotApplicable(f"{cx.pdb_id}: ligand cannot be moved clear of the pocket within {DOCK_MAX} Å")
    shift = sign * dist
    coords = _displaced(front, shift, roll)
    center, cam_dist = _combined_frame(coords)
    displaced = front.with_coords(coords)
    both = displaced.with_coords(initial_view(coords, "front", center=center, distance=cam_dist))
    docked = front.with_coords(initial_view(front.coords, "front", center=center, distance=cam_dist))
    pocket = displaced.subset(~lig)
    ligand = displaced.subset(lig)
    images = ([ImageSpec(f"pocket_{v}", framed(pocket, v), f"pocket alone, {v} view") for v in THREE_VIEWS]
              + [ImageSpec(f"ligand_{v}", framed(ligand, v), f"displaced ligand alone, {v} view") for v in THREE_VIEWS]
              + [ImageSpec("both_front", both, "pocket and displaced ligand together, front view")])
    answer_cmds = [Command("roll", roll.axis, -roll.value), Command("move", "x", -shift)]
    answer = format_commands(answer_cmds)
    params = {"displacement": format_commands([Command("move", "x", shift), roll]), "commands": answer,
              "shift": shift, "roll_axis": roll.axis, "roll_angle": -roll.value, "move": -shift,
              "which": "ligand"}
    return _base("docking", cx, images, answer, params, {},
                 references={"docked": docked})
