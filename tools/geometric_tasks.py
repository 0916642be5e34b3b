"""Solvers of the geometric MiSI-Bench tasks when the complex's 3D structure is known.

Each solver takes what a test taker has: the question's images in the task's order (paths,
PIL images or arrays), the loaded :class:`~misi_agent.structure.Complex` of the entry the
question names and, where the task has them, the named bond and the option texts. It never
sees a question's answer or generation metadata. Each returns a
:class:`~misi_agent.tools.spatial_records.SpatialAnswer`: the exact answer string, the best
hypothesis's score, the runner-up and the margin, the registration residual and whether it
is sure.

Method (analysis by synthesis, :mod:`misi_agent.tools.command_search`): register the
structure to the initial front view (:func:`misi_agent.tools.registration.register`), then
predict every candidate answer's image (the registered scene moved by the candidate's
commands, through the registered camera) and score it against the image that shows the
result. Image order per task (:mod:`misi_agent.bench.tasks`):

=====================  ==============================================================
translation, rotation,  1-3 initial front/left/top, 4 front after the operation
zooming
translation_rotation   1-3 reference front/left/top, 4 reference after f2(f1), 5-7 target
                       front/left/top, 8-11 options A-D
rotation_rotation      1-3 front/left/top, 4 after r1, r2, 5-8 options A-D
docking                1-3 pocket alone front/left/top, 4-6 displaced ligand alone
                       front/left/top (each part framed by itself), 7 both together (front)
interaction_location   1-6 front/left/top/back/right/bottom
=====================  ==============================================================
"""
from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from misi_agent.bench import tasks as T
from misi_agent.camera import NEAR, VIEW_COMMANDS, Command, CommandError, compose_rigid, format_commands, parse_commands
from misi_agent.errors import MisiError
from misi_agent.scene import Scene, scene_from_complex
from misi_agent.structure import Complex
from misi_agent.tools.atom_detection import POCKET_CLASSES
from misi_agent.tools.command_search import REFINE_TOP, Ranking, move_roll_pairs, moves, rank, roll_pairs, rolls, score_candidates
from misi_agent.tools.registration import (
    OK_EXPLAINED,
    OK_MATCHED,
    ScenePoints,
    ViewCamera,
    backward_samples,
    fit_quality,
    image_analysis,
    match_cost,
    refine_shift,
    register,
    register_free_shift,
    scene_points,
    unexplained,
)
from misi_agent.tools.spatial_records import Registration, SpatialAnswer

SURE_MARGIN_PX = 0.15  # a runner-up this much worse (chamfer px at 512) leaves the answer clear
SURE_MARGIN_A = 0.75  # interaction location: Å between the best and the next option's distance
RESULT_OK = 0.3  # a result image is explained when this share of atoms is matched and of its pixels explained
JOINT_TOP = 5  # multiple choice: the best few inferred command pairs tried against every option
DOCK_TOP_ROLLS = 6  # docking: rolls refined on the ligand views and tried with every shift
FRAMING_PRIOR_PX = 0.05  # docking: cost (px) per Å between a shift and the one the framing implies (a tie-breaker)
MIN_SHIFT_EVIDENCE_PX = 0.5  # docking: if no shift changes image 7's cost by this much, the ligand is not seen there


class SpatialTaskError(MisiError):
    """A solver given the wrong number of images, an unknown atom or unreadable options (one line)."""


# ----------------------------------------------------------------------------- shared steps


def _check_images(images: Sequence[Any], task: str) -> list[Any]:
    n = T.task_info(task).n_images
    images = list(images)
    if len(images) != n:
        raise SpatialTaskError(f"{task} takes {n} images in the task's order, got {len(images)}")
    return images


@dataclass(frozen=True)
class Registered:
    """A complex registered to its front view: scene, points, registration record and camera."""

    scene: Scene
    points: ScenePoints
    record: Registration
    camera: ViewCamera


_REGISTERED: "OrderedDict[tuple, tuple[Complex, Registered]]" = OrderedDict()


def _cache_key(kind: str, cx: Complex, image: Any) -> tuple | None:
    """The registration cache's key of an image file (None for in-memory images)."""
    if not isinstance(image, (str, Path)):
        return None
    try:
        st = os.stat(image)
    except OSError:
        return None
    return (kind, id(cx), str(Path(image).resolve()), st.st_size, st.st_mtime_ns)


def _cached(kind: str, cx: Complex, image: Any, make) -> Registered:
    """Registrations of image files are remembered per complex object (the ligand-choice check and the
    solver then share one)."""
    key = _cache_key(kind, cx, image)
    if key is None:
        return make()
    hit = _REGISTERED.get(key)
    if hit is not None and hit[0] is cx:
        _REGISTERED.move_to_end(key)
        return hit[1]
    reg = make()
    _REGISTERED[key] = (cx, reg)
    while len(_REGISTERED) > 16:
        _REGISTERED.popitem(last=False)
    return reg


def register_front(cx: Complex, image: Any) -> Registered:
    """Register the complex's canonical front view to an image of it (the benchmark framing as the start)."""
    def make() -> Registered:
        scene = scene_from_complex(cx, "front")
        sp = scene_points(scene)
        rec, cam = register(scene, image, points=sp)
        return Registered(scene, sp, rec, cam)

    return _cached("front", cx, image, make)


def register_front_quick(cx: Complex, image: Any) -> Registered:
    """:func:`register_front` without the framing search: a cheap test of whether ``cx`` is what the image shows.

    A fit that is ``ok`` is exactly what :func:`register_front` would return, so it is
    remembered as that too (the solver then reuses it).
    """
    full = _REGISTERED.get(_cache_key("front", cx, image))
    if full is not None and full[0] is cx:
        return full[1]

    def make() -> Registered:
        scene = scene_from_complex(cx, "front")
        sp = scene_points(scene)
        rec, cam = register(scene, image, points=sp, search=False)
        return Registered(scene, sp, rec, cam)

    reg = _cached("front-quick", cx, image, make)
    if reg.record.ok:
        _cached("front", cx, image, lambda: reg)
    return reg


def register_pocket(cx: Complex, image: Any) -> Registered:
    """Register the pocket alone (front orientation, framing unknown) to an image of the pocket alone."""
    def make() -> Registered:
        front = scene_from_complex(cx, "front")
        scene = front.subset(~front.is_ligand)
        sp = scene_points(scene)
        rec, cam, _ = _register_free(sp, image)
        return Registered(scene, sp, rec, cam)

    return _cached("pocket", cx, image, make)


def _scale(image_an) -> float:
    return image_an.width / 512.0


def _result_fit(an, sp: ScenePoints, cam: ViewCamera) -> dict[str, float]:
    """How well the winning prediction explains the image it was matched to (zoomed views explain less)."""
    q = fit_quality(an, sp, cam)
    return {"matched": q["matched"], "explained": q["explained"], "chamfer": q["chamfer"],
            "ok": q["matched"] >= RESULT_OK and q["explained"] >= RESULT_OK}


def _answer(task: str, ranking: Ranking, registrations: Sequence[Registration], result_fits: Sequence[dict],
            details: dict, notes: list[str], sure_margin: float, answer: str | None = None) -> SpatialAnswer:
    best, runner = ranking.best, ranking.runner_up
    margin = ranking.margin
    reg_ok = all(r.ok for r in registrations)
    fit_ok = all(f["ok"] for f in result_fits)
    if not reg_ok:
        notes.append("the structure does not fit the initial image (wrong PDB ID or ligand?): answer unsure")
    if not fit_ok:
        notes.append("the best prediction does not fit the result image well: answer unsure")
    if margin is not None and margin < sure_margin:
        notes.append(f"the runner-up is close (margin {margin:.2f}): answer unsure")
    confident = reg_ok and fit_ok and (margin is None or margin >= sure_margin)
    residual = max((r.residual_px for r in registrations), default=None)
    details = dict(details)
    details["registrations"] = [r.to_dict() for r in registrations]
    details["result_fit"] = [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in f.items()} for f in result_fits]
    return SpatialAnswer(task, answer if answer is not None else ranking.answers[best], float(ranking.costs[best]),
                         None if runner is None else ranking.answers[runner],
                         None if runner is None else float(ranking.costs[runner]), margin, residual, confident,
                         tuple(notes), ranking.top(), details)


def _unit(task: str, images: Sequence[Any], cx: Complex, candidates: list[list[Command]]) -> SpatialAnswer:
    images = _check_images(images, task)
    reg = register_front(cx, images[0])
    an = image_analysis(images[3], reg.points.names)
    costs = score_candidates(an, reg.points, reg.camera, candidates)
    ranking = rank(candidates, costs)
    best = candidates[ranking.best]
    fit = _result_fit(an, reg.points.moved(best), reg.camera)
    return _answer(task, ranking, [reg.record], [fit], {"candidates": len(candidates)}, [], SURE_MARGIN_PX * _scale(an))


# ----------------------------------------------------------------------------- unit tasks


def solve_translation(images: Sequence[Any], cx: Complex) -> SpatialAnswer:
    """T1: the move (x or y, whole Å, −4..4, not 0) that takes image 1 to image 4.

    Registers the structure to image 1, predicts image 4 for each of the 16 candidate moves
    and returns the best (``move x 3``) with its chamfer score, the runner-up and the margin.
    """
    return _unit(T.TRANSLATION, images, cx, [[m] for m in moves(T.TRANSLATION_GRID)])


def solve_rotation(images: Sequence[Any], cx: Complex) -> SpatialAnswer:
    """T2: the roll (x, y or z; multiple of 15° in −90..90, not 0) that takes image 1 to image 4."""
    return _unit(T.ROTATION, images, cx, [[r] for r in rolls(T.ROTATION_GRID)])


def solve_zoom(images: Sequence[Any], cx: Complex) -> SpatialAnswer:
    """T3: how far (``move z d``, whole Å, 40..60) the scene came toward the camera.

    The registered depth of image 1 and the perspective of image 4 fix d: every candidate
    predicts where each atom lands after the move and the one whose atoms land on image 4's
    atoms wins (1 Å changes the scale by several per cent at these distances).
    """
    return _unit(T.ZOOMING, images, cx, [[Command("move", "z", v)] for v in T.ZOOM_GRID.values()])


# ----------------------------------------------------------------------------- multiple choice


def _choose_option(task: str, ref: Registered, ref_after, pairs: list, ref_costs: np.ndarray, target: Registered,
                   option_images: Sequence[Any], repeat: int, notes: list[str], extra_regs: list[Registration]) -> SpatialAnswer:
    """Pick the option image that the inferred command pair explains best.

    The best :data:`JOINT_TOP` pairs from the reference are applied to the target's state
    (``repeat`` times: T6 applies the pair again to the after-image's state) and scored
    against every option; an option's cost is the lowest reference + option cost over those
    pairs, so a near tie in the reference is settled by the options.
    """
    ref_rank = rank(pairs, ref_costs)
    order = [int(i) for i in ref_rank.order[:JOINT_TOP] if np.isfinite(ref_costs[int(i)])]
    letters = list(T.CHOICE_LETTERS)
    ans = [image_analysis(im, target.points.names) for im in option_images]
    table = np.full((len(letters), len(order)), np.inf)
    for j, pi in enumerate(order):
        cmds = list(pairs[pi]) * repeat
        moved = target.points.moved(cmds)
        for k, an in enumerate(ans):
            table[k, j] = match_cost(an, moved, target.camera).cost
    joint = table + ref_costs[order][None, :]
    option_costs = joint.min(axis=1)
    ranking = rank(letters, option_costs)
    k_best = ranking.best
    j_best = int(np.argmin(joint[k_best]))
    inferred = format_commands(list(pairs[order[j_best]]))
    best_pair = list(pairs[order[j_best]])
    fits = [_result_fit(ref_after, ref.points.moved(best_pair), ref.camera),
            _result_fit(ans[k_best], target.points.moved(best_pair * repeat), target.camera)]
    details = {"inferred_commands": inferred, "reference_top": [c.to_dict() for c in ref_rank.top()],
               "option_costs": {L: float(c) for L, c in zip(letters, table[:, j_best])},
               "option_joint_costs": {L: float(c) for L, c in zip(letters, option_costs)}}
    sure = SURE_MARGIN_PX * _scale(ans[0])
    return _answer(task, ranking, [ref.record] + extra_regs, fits, details, notes, sure)


def solve_translation_rotation(images: Sequence[Any], cx: Complex, target: Complex) -> SpatialAnswer:
    """T5: infer f1 (move) and f2 (roll) from the reference (images 1 and 4), apply them to the
    target (image 5) and return the option (images 8-11) that matches: a letter A-D.

    ``cx`` is the reference complex, ``target`` the target complex (the second PDB ID).
    """
    images = _check_images(images, T.TRANSLATION_ROTATION)
    ref = register_front(cx, images[0])
    pairs = move_roll_pairs()
    an = image_analysis(images[3], ref.points.names)
    costs = score_candidates(an, ref.points, ref.camera, pairs, refine_top=REFINE_TOP)
    tgt = register_front(target, images[4])
    return _choose_option(T.TRANSLATION_ROTATION, ref, an, pairs, costs, tgt, images[7:11], 1, [], [tgt.record])


def solve_rotation_rotation(images: Sequence[Any], cx: Complex) -> SpatialAnswer:
    """T6: infer the two rolls (different axes) from images 1 → 4, apply them again to image 4's
    state and return the option (images 5-8) that matches: a letter A-D."""
    images = _check_images(images, T.ROTATION_ROTATION)
    ref = register_front(cx, images[0])
    pairs = roll_pairs(T.ROTROT_GRID)
    an = image_analysis(images[3], ref.points.names)
    costs = score_candidates(an, ref.points, ref.camera, pairs, refine_top=REFINE_TOP)
    # the options show the state of image 4 moved again by the pair: the front state moved twice
    return _choose_option(T.ROTATION_ROTATION, ref, an, pairs, costs, ref, images[4:8], 2, [], [])


# ----------------------------------------------------------------------------- docking


def _register_free(sp: ScenePoints, image: Any, moment_classes: Sequence[str] | None = None
                   ) -> tuple[Registration, ViewCamera, Any]:
    """Register points whose framing is unknown (search over depth, then ICP); returns record, camera, analysis.

    ``moment_classes`` limits the starting estimate to classes only these points are drawn in
    (the pocket's carbons when the ligand is in the picture too).
    """
    an = image_analysis(image, sp.names)
    cam = register_free_shift(an, sp, ViewCamera(an.width, an.height), moment_classes)
    q = fit_quality(an, sp, cam)
    ok = q["matched"] >= OK_MATCHED and q["explained"] >= OK_EXPLAINED
    rec = Registration(an.width, an.height, cam.fov_deg, tuple(float(v) for v in cam.shift), q["residual"], q["chamfer"],
                       q["matched"], q["explained"], q["tol"], bool(ok), q["n_in_image"], (),
                       () if ok else ("poor fit: the structure may not be what the image shows",))
    return rec, cam, an


def solve_docking(images: Sequence[Any], cx: Complex) -> SpatialAnswer:
    """T7: the roll about the ligand's own centre and the move along x that put the displaced
    ligand back into its pocket (``roll a θ, move x d``).

    The displaced ligand is the bound ligand turned about its centre by R and moved by s
    along x. R is read from the ligand-alone images (4-6, each framed on the ligand itself):
    every roll of the grid predicts the ligand's shape in the three views (centred, its depth
    from the spread of its pixels, then refined by ICP for the best few) and is scored
    against them. s is read from the image of both together (7): the pocket's known shape
    fixes that image's camera, the class pixels the pocket does not explain are the ligand's,
    and every whole-Å s of the grid (with each of the best rolls) is scored against them. The
    benchmark's framing (the centroid of all atoms on the line of sight) also implies s from
    the pocket's place alone; that estimate breaks ties (:data:`FRAMING_PRIOR_PX` per Å), which
    matters when labels hide the ligand in image 7. The answer undoes the best (R, s):
    ``roll a −θ, move x −s``. The pocket-alone front view (1) is registered too, to check
    that the structure is the one shown.
    """
    images = _check_images(images, T.DOCKING)
    front = scene_from_complex(cx, "front")
    lig = front.is_ligand
    pocket_sp = scene_points(front.subset(~lig))
    ligand_sp = scene_points(front.subset(lig))
    views = list(T.VIEWS3)
    pocket_rec = register_pocket(cx, images[0]).record
    # --- R from the ligand-alone views
    lig_ans = [image_analysis(im, ligand_sp.names) for im in images[3:6]]
    samples = [backward_samples(an, ligand_sp.names) for an in lig_ans]
    rolls_ = rolls(T.DOCKING_ROLL_GRID)
    coarse = np.zeros(len(rolls_))
    for i, r in enumerate(rolls_):
        turned = ligand_sp.moved([r])
        for v, an, smp in zip(views, lig_ans, samples):
            pts = turned.moved(list(VIEW_COMMANDS[v]))
            coarse[i] += match_cost(an, pts, _centred_camera(an, pts), samples=smp).cost / len(views)
    top_r = [int(i) for i in np.argsort(coarse, kind="stable")[:DOCK_TOP_ROLLS]]
    fine = {}
    for i in top_r:
        turned = ligand_sp.moved([rolls_[i]])
        total = 0.0
        for v, an, smp in zip(views, lig_ans, samples):
            pts = turned.moved(list(VIEW_COMMANDS[v]))
            cam = refine_shift(an, pts, _centred_camera(an, pts), taus=(8.0, 4.0), steps=4)
            total += match_cost(an, pts, cam, samples=smp).cost / len(views)
        fine[i] = total
    # --- s from the image of both together: the pocket fixes the camera, the rest of the pixels is the ligand
    both_sp = scene_points(front)
    both_rec, cam7, an7 = _register_free(pocket_sp, images[6], POCKET_CLASSES)
    rest = unexplained(an7, pocket_sp, cam7)
    s_prior = _framing_shift(front, cam7)
    s_values = [float(v) for v in T.DOCKING_SHIFT_GRID.values()]
    smp7 = backward_samples(rest, ligand_sp.names)
    notes = []
    hyps, costs, c7 = [], [], []
    for i in top_r:
        turned = ligand_sp.moved([rolls_[i]])
        for s_ in s_values:
            c7.append(match_cost(rest, turned.moved([Command("move", "x", s_)]), cam7, samples=smp7).cost)
            hyps.append((rolls_[i], s_))
            costs.append(fine[i] + c7[-1] + FRAMING_PRIOR_PX * abs(s_ - s_prior))
    costs = np.array(costs)
    if np.ptp(np.array(c7[:len(s_values)])) < MIN_SHIFT_EVIDENCE_PX:
        notes.append("the ligand is hardly visible in the image of both (labels over it?): its shift comes from "
                     "where the framing puts the scene's centre")

    def answer_of(h) -> str:
        r, s_ = h
        return format_commands([Command("roll", r.axis, -r.value), Command("move", "x", -float(s_))])

    ranking = rank(hyps, costs, answer_of=answer_of, text_of=answer_of)
    r, s_ = hyps[ranking.best]
    fit = _result_fit(an7, _move_ligand(both_sp, front, [r, Command("move", "x", s_)]), cam7)
    details = {"displacement": format_commands([Command("move", "x", float(s_)), r]),
               "shift_from_framing": round(float(s_prior), 2),
               "ligand_view_costs": {format_commands([rolls_[i]]): round(float(fine[i]), 3) for i in top_r}}
    return _answer(T.DOCKING, ranking, [pocket_rec, both_rec], [fit], details, notes, SURE_MARGIN_PX * _scale(an7))


def _framing_shift(front: Scene, cam: ViewCamera) -> float:
    """The ligand's displacement along x implied by the benchmark's framing of the image of both: the
    centroid of all displayed atoms is on the line of sight, so with the pocket's place known
    (camera shift ``cam.shift``) the ligand's share of that centroid fixes how far it was moved."""
    lig = np.asarray(front.is_ligand, bool)
    n_p, n_l = int((~lig).sum()), int(lig.sum())
    cp, cl = front.coords[~lig].mean(axis=0), front.coords[lig].mean(axis=0)
    return float(((n_p + n_l) * (-cam.shift[0]) - n_p * cp[0]) / n_l - cl[0])


def _centred_camera(an, sp: ScenePoints) -> ViewCamera:
    """A camera looking at the points' centroid on the axis, at the depth where their spread matches the image's."""
    cam = ViewCamera(an.width, an.height)
    c = sp.center
    pix = np.concatenate([p for n, p in an.ridge.items() if n in sp.names and len(p)] or [np.zeros((0, 2))])
    d_ref = 50.0
    ref = cam.with_shift((-c[0], -c[1], -c[2] - d_ref))
    uv, depth = ref.project(sp.points)
    ok = (depth > NEAR) & np.isfinite(uv).all(axis=1)
    if len(pix) < 5 or ok.sum() < 3:
        return ref
    spread_img = np.sqrt(((pix - pix.mean(0)) ** 2).sum(1).mean())
    spread_pred = np.sqrt(((uv[ok] - uv[ok].mean(0)) ** 2).sum(1).mean())
    d = d_ref * spread_pred / max(spread_img, 1e-6)
    return cam.with_shift((-c[0], -c[1], -c[2] - d))


def _move_ligand(sp: ScenePoints, scene: Scene, commands) -> ScenePoints:
    """The whole scene's points with only the ligand's points moved (rolls about the ligand's centroid)."""
    lig = np.asarray(scene.is_ligand, bool)
    R, t = compose_rigid(commands, scene.coords[lig].mean(axis=0))
    mask = lig[sp.owner]
    pts = sp.points.copy()
    pts[mask] = pts[mask] @ R.T + t
    return replace(sp, points=pts)


# ----------------------------------------------------------------------------- interaction location


def _name_match(names: np.ndarray, wanted: str) -> np.ndarray:
    """Indices of atoms named ``wanted``; failing that, of atoms named ``wanted`` plus primes/quotes
    (``O2`` → ``O2'``), since a name ending in a prime is easily cut short when read from text."""
    wanted = str(wanted).strip().upper()
    exact = np.flatnonzero(names == wanted)
    if len(exact) or not wanted:
        return exact
    return np.flatnonzero(np.array([str(n).rstrip("'\"*") == wanted.rstrip("'\"*") for n in names], bool))


def bond_atoms(cx: Complex, bond: Mapping[str, Any]) -> tuple[int, int]:
    """Scene indices (pocket first, then ligand) of the bond's residue atom and ligand atom."""
    p = cx.pocket
    number = str(bond.get("residue_number", "")).strip()
    num, ins = (number[:-1], number[-1]) if number and number[-1].isalpha() else (number, "")
    try:
        num_i = int(num)
    except ValueError:
        raise SpatialTaskError(f"residue number {number!r} is not a number") from None
    mask = (p.chain_id == str(bond.get("chain", ""))) & (p.res_id == num_i) & (p.ins_code == ins.upper())
    if bond.get("residue_name"):
        mask &= p.res_name == str(bond["residue_name"]).upper()
    res = np.flatnonzero(mask)
    hits = res[_name_match(p.atom_name[res], bond.get("residue_atom", ""))] if len(res) else res
    if len(hits) != 1:
        raise SpatialTaskError(f"no pocket atom {bond.get('residue_name', '')} {number} {bond.get('residue_atom')} "
                               f"on chain {bond.get('chain')} in {cx.pdb_id.upper()}")
    lig = _name_match(cx.ligand.atom_name, bond.get("ligand_atom", ""))
    if len(lig) != 1:
        raise SpatialTaskError(f"the ligand {cx.ligand_code} of {cx.pdb_id.upper()} has no atom {bond.get('ligand_atom')!r}")
    return int(hits[0]), cx.pocket.array_length() + int(lig[0])


def _net_xy(text: str) -> tuple[float, float]:
    try:
        cmds = parse_commands(text)
    except CommandError as exc:
        raise SpatialTaskError(f"option {text!r}: {exc}") from None
    x = sum(c.value for c in cmds if c.op == "move" and c.axis == "x")
    y = sum(c.value for c in cmds if c.op == "move" and c.axis == "y")
    return float(x), float(y)


def locate_interaction(images: Sequence[Any], cx: Complex, bond: Mapping[str, Any],
                       options: Mapping[str, str]) -> SpatialAnswer:
    """T8: the option whose move brings the named H-bond's midpoint onto the line of sight through
    the centre of the front view (image 1).

    The midpoint of the two atoms is taken in the front view's coordinates, with the camera
    registered to image 1 (so an image framed differently from the benchmark still gives the
    right move); the needed move is ``move x −cx, move y −cy``. Options are compared by their
    net x and y moves; the score is the distance (Å) between an option's move and the needed
    one.
    """
    images = _check_images(images, T.INTERACTION_LOCATION)
    letters = [L for L in T.CHOICE_LETTERS if L in options]
    if len(letters) != len(T.CHOICE_LETTERS):
        raise SpatialTaskError("interaction location needs the four options A-D")
    reg = register_front(cx, images[0])
    i, j = bond_atoms(cx, bond)
    mid = (reg.scene.coords[i] + reg.scene.coords[j]) / 2.0 + np.asarray(reg.camera.shift, float)
    need = (-float(mid[0]), -float(mid[1]))
    moves_ = [_net_xy(options[L]) for L in letters]
    dist = np.array([np.hypot(x - need[0], y - need[1]) for x, y in moves_])
    ranking = rank(letters, dist)
    details = {"bond_midpoint_front": [round(float(v), 3) for v in mid], "needed_move": f"move x {need[0]:.2f}, move y {need[1]:.2f}",
               "option_moves": {L: list(m) for L, m in zip(letters, moves_)}}
    fit = {"matched": reg.record.matched, "explained": reg.record.explained, "chamfer": reg.record.chamfer_px,
           "ok": reg.record.ok}
    return _answer(T.INTERACTION_LOCATION, ranking, [reg.record], [fit], details, [], SURE_MARGIN_A)
