"""Solvers of the geometric MiSI-Bench tasks from the pictures alone (image-only grounding).

The same analysis by synthesis as :mod:`misi_agent.tools.geometric_tasks`, with the 3D scene
taken from a :class:`~misi_agent.tools.reconstruction.Reconstruction` of the question's own
views instead of a structure file: the reconstruction's fused centre-line points (every
colour class, in Å in the front frame of the pictured state) are moved by every candidate
command list and projected through the benchmark camera, and the candidate whose
prediction matches the image that shows the result wins. Rolls turn about the centroid of
the displayed atoms, which the views' framing puts on the line of sight at the
reconstruction's camera distance (:attr:`Reconstruction.center`), not about the centroid
of the reconstructed points.

Magnitudes in Å (translation, zoom, docking shift, interaction location) scale with the
reconstruction's camera distance, i.e. with how well its Å scale is known
(:func:`misi_agent.tools.reconstruction.estimate_distance`); rotations do not.

Interaction location needs the named atoms: the ligand atom is found by its label when the
label reader (:mod:`misi_agent.tools.label_reading`) reads it next to a reconstructed ligand
atom, and the residue atom is the reconstructed pocket atom of the named element nearest to
it (an H-bond partner is within about 3.5 Å).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

from misi_agent.bench import tasks as T
from misi_agent.camera import Command, compose_rigid, format_commands
from misi_agent.tools import geometric_tasks as G
from misi_agent.tools.atom_detection import POCKET_CLASSES, as_rgb, find_balls
from misi_agent.tools.command_search import REFINE_TOP, move_roll_pairs, moves, rank, roll_pairs, rolls, score_candidates
from misi_agent.tools.reconstruction import BALL_RADIUS_A, Reconstruction, reconstruct
from misi_agent.tools.registration import (
    FREE_ICP_TAUS,
    OK_EXPLAINED,
    OK_MATCHED,
    ScenePoints,
    ViewCamera,
    fit_quality,
    image_analysis,
    moment_shift,
    refine_shift,
    register_free_shift,
    unexplained,
)
from misi_agent.tools.spatial_records import Registration, SpatialAnswer

MAX_POINTS = 2500  # cloud points used for matching (evenly thinned beyond this)
CLASH_A = 2.2  # Å: a ligand atom this close to a pocket point clashes
CONTACT_A = 4.5  # Å: pocket points within this distance of a ligand atom are in contact
HBOND_A = 3.4  # Å: ligand O/N to pocket O/N within this distance may be H-bonded
HBOND_SHELL_A = (2.3, 3.8)  # Å: where an H-bond partner of the ligand atom can be
OPTION_MATCH_A = 1.5  # Å: an option is consistent when a partner point lies this close to where it implies
PARTNER_MAX_A = 4.0  # Å: a named residue atom farther than this from the ligand atom is a misreading
POCKET_CENTRE_WEIGHT = 5.0  # score per Å between the docked ligand's centre and the pocket's centre along x


def views_of(images: Sequence[Any], names: Sequence[str] = T.VIEWS3) -> dict[str, Any]:
    """The first ``len(names)`` images keyed by view name (the task's image order)."""
    return {n: im for n, im in zip(names, images)}


def cloud_points(rec: Reconstruction, max_points: int = MAX_POINTS, which: str = "all") -> ScenePoints:
    """The reconstruction's centre-line cloud as matchable points (every point counts as an atom).

    ``which`` keeps ``all`` points, only the ``ligand``'s classes near its atoms, or only the
    ``pocket``'s. The centre of rotation is :attr:`Reconstruction.center`.
    """
    P = np.asarray(rec.cloud, float)
    C = np.asarray(rec.cloud_classes).astype(str)
    if which != "all" and len(P):
        lig = rec.coords[rec.is_ligand]
        near = np.zeros(len(P), bool)
        if len(lig):
            near = cKDTree(lig).query(P)[0] < 0.9
        is_lig = (C == "LIGAND_C") | near
        keep = is_lig if which == "ligand" else ~is_lig
        P, C = P[keep], C[keep]
    if len(P) > max_points:
        idx = np.linspace(0, len(P) - 1, max_points).astype(int)
        P, C = P[idx], C[idx]
    names = tuple(dict.fromkeys(C.tolist())) or ("LIGAND_C",)
    cls = np.array([names.index(c) for c in C], int)
    idx = np.arange(len(P))
    center = rec.center if which == "all" else (P.mean(axis=0) if len(P) else rec.center)
    return ScenePoints(P.reshape(-1, 3), cls, names, idx, np.asarray(center, float), idx)


def _record(an, sp: ScenePoints, cam: ViewCamera, rec: Reconstruction) -> Registration:
    """How well the reconstruction explains an image, in the registration record's terms."""
    q = fit_quality(an, sp, cam)
    ok = q["matched"] >= OK_MATCHED and q["explained"] >= OK_EXPLAINED
    notes = (f"reconstructed from {len(rec.views)} views: {len(rec)} atoms, {len(rec.cloud)} centre-line points; "
             f"Å scale from {rec.scale_source}",)
    if not ok:
        notes += ("the reconstruction explains the image poorly",)
    return Registration(an.width, an.height, cam.fov_deg, tuple(float(v) for v in cam.shift), q["residual"], q["chamfer"],
                        q["matched"], q["explained"], q["tol"], bool(ok), q["n_in_image"], (), notes)


def _front(images: Sequence[Any], rec: Reconstruction | None) -> tuple[Reconstruction, ScenePoints, ViewCamera, Registration]:
    rec = rec if rec is not None else reconstruct(views_of(images[:3]))
    sp = cloud_points(rec)
    an0 = image_analysis(images[0], sp.names)
    cam = ViewCamera(an0.width, an0.height)
    return rec, sp, cam, _record(an0, sp, cam, rec)


def _details(rec: Reconstruction) -> dict[str, Any]:
    return {"grounding": "images", "reconstruction": rec.summary()}


def _unit(task: str, images: Sequence[Any], candidates, rec: Reconstruction | None) -> SpatialAnswer:
    images = G._check_images(images, task)
    rec, sp, cam, reg = _front(images, rec)
    an = image_analysis(images[3], sp.names)
    costs = score_candidates(an, sp, cam, candidates)
    ranking = rank(candidates, costs)
    fit = G._result_fit(an, sp.moved(list(candidates[ranking.best])), cam)
    details = {"candidates": len(candidates), **_details(rec)}
    return G._answer(task, ranking, [reg], [fit], details, [], G.SURE_MARGIN_PX * G._scale(an))


def solve_translation(images: Sequence[Any], rec: Reconstruction | None = None) -> SpatialAnswer:
    """T1 from the pictures: the move (x or y, whole Å) that best predicts image 4 from the reconstruction."""
    return _unit(T.TRANSLATION, images, [[m] for m in moves(T.TRANSLATION_GRID)], rec)


def solve_rotation(images: Sequence[Any], rec: Reconstruction | None = None) -> SpatialAnswer:
    """T2 from the pictures: the roll (x, y or z; 15° steps) that best predicts image 4."""
    return _unit(T.ROTATION, images, [[r] for r in rolls(T.ROTATION_GRID)], rec)


def solve_zoom(images: Sequence[Any], rec: Reconstruction | None = None) -> SpatialAnswer:
    """T3 from the pictures: the ``move z d`` (40..60 Å) that best predicts image 4.

    The after-image fixes d relative to the camera distance (d / D) precisely, but d in Å
    needs the Å scale. The after-image's ligand balls are drawn 2-3 times larger than in the
    initial views, so their apparent size (measured to a fraction of a pixel,
    :func:`subpixel_ball_radius`) gives the scale better: with the ratio ρ = d / D from the best
    candidate (refined between neighbouring candidates), each ball matched to a reconstructed
    ligand atom at normalised depth t gives D = f·r / (r_px · (t − ρ)); the median rescales the
    reconstruction and the candidates are scored again.
    """
    images = G._check_images(images, T.ZOOMING)
    rec = rec if rec is not None else reconstruct(views_of(images[:3]))
    values = list(T.ZOOM_GRID.values())
    first = _unit(T.ZOOMING, images, [[Command("move", "z", v)] for v in values], rec)
    rho = _zoom_ratio(first, rec)
    D = _after_ball_distance(images, rec, rho) if rho is not None else None
    known = not rec.scale_source.startswith("default")  # a default scale may be far off: accept any estimate
    if D is None or (known and not (0.8 * rec.distance <= D <= 1.25 * rec.distance)):
        return first
    rescaled = replace(rec, coords=(rec.coords - rec.center) * (D / rec.distance) + np.array([0.0, 0.0, -D]),
                       cloud=(rec.cloud - rec.center) * (D / rec.distance) + np.array([0.0, 0.0, -D]), distance=D,
                       scale_source=rec.scale_source + "; refined by the after-image's ligand balls")
    return _unit(T.ZOOMING, images, [[Command("move", "z", v)] for v in values], rescaled)


def _zoom_ratio(ans: SpatialAnswer, rec: Reconstruction) -> float | None:
    """d / D of the best zoom candidate, refined by a parabola through its neighbours' costs."""
    try:
        best = float(ans.answer.split()[-1])
    except (ValueError, IndexError):
        return None
    costs = {float(c.text.split()[-1]): c.score for c in ans.top}
    lo, hi = costs.get(best - 1), costs.get(best + 1)
    if lo is not None and hi is not None:
        den = lo - 2 * costs[best] + hi
        if den > 1e-9:
            best += float(np.clip(0.5 * (lo - hi) / den, -0.5, 0.5))
    return best / rec.distance


def subpixel_ball_radius(value: np.ndarray, x: float, y: float, r0: float, n: int = 32) -> float | None:
    """A ball's radius (px) to a fraction of a pixel: along ``n`` rays from its centre, where the
    brightness first falls below half of the ball's inner brightness and stays low (a ray that runs
    into a stick, a neighbour or a label is skipped); the median over the rays that end."""
    ang = np.linspace(0, 2 * np.pi, n, endpoint=False)
    s = np.arange(0.3 * r0, 1.8 * r0 + 2.0, 0.1)
    px = x - 0.5 + np.cos(ang)[:, None] * s[None]
    py = y - 0.5 + np.sin(ang)[:, None] * s[None]
    prof = ndimage.map_coordinates(value, [py.ravel(), px.ravel()], order=1, mode="nearest").reshape(n, len(s))
    thr = 0.5 * float(np.median(prof[:, (s > 0.6 * r0) & (s < 0.85 * r0)]))
    out = []
    for p in prof:
        below = np.flatnonzero((p < thr) & (s > 0.5 * r0))
        if not len(below) or below[0] == 0 or np.any(p[below[0]:below[0] + 8] > thr):
            continue
        j = below[0]
        out.append(s[j - 1] + 0.1 * (p[j - 1] - thr) / (p[j - 1] - p[j] + 1e-9))
    return float(np.median(out)) if len(out) >= n // 4 else None


def _ball_samples(image: Any, rec: Reconstruction, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """(f·r_ball / τ, measured radius px) of the image's balls matched to reconstructed ligand atoms, where
    τ is the atom's normalised depth after the scene came ``rho`` (× the camera distance) closer."""
    lig = np.flatnonzero(rec.is_ligand)
    if len(lig) < 2:
        return np.zeros(0), np.zeros(0)
    an = image_analysis(image)
    balls = find_balls(an)
    if not balls:
        return np.zeros(0), np.zeros(0)
    cam = ViewCamera(an.width, an.height)
    tau = -rec.coords[lig, 2] / rec.distance - rho
    uv, _ = cam.project(rec.coords[lig] + np.array([0.0, 0.0, rho * rec.distance]))
    centres = np.array([[b.x, b.y] for b in balls])
    radii = np.array([b.radius for b in balls])
    d, k = cKDTree(centres).query(np.nan_to_num(uv, nan=-1e6))
    k = np.minimum(k, len(radii) - 1)
    ok = np.flatnonzero(np.isfinite(d) & (d <= 0.6 * radii[k]) & (tau > 0.05))
    value = as_rgb(image).max(axis=2).astype(float) / 255.0
    fine = [subpixel_ball_radius(value, balls[k[i]].x, balls[k[i]].y, balls[k[i]].radius) for i in ok]
    sel = np.array([f is not None for f in fine], bool)
    if not sel.any():
        return np.zeros(0), np.zeros(0)
    return cam.focal * BALL_RADIUS_A / tau[ok[sel]], np.array([f for f in fine if f is not None])


def _after_ball_distance(images: Sequence[Any], rec: Reconstruction, rho: float) -> float | None:
    """The camera distance (Å) from the zoomed image's ligand balls: the median of f·r / (r_px · τ) over the
    balls matched to reconstructed ligand atoms (τ: the atom's normalised depth after the zoom)."""
    x, y = _ball_samples(images[3], rec, rho)
    if len(x) < 3:
        return None
    return float(np.median(x / y))


class _Reg:
    """What :func:`misi_agent.tools.geometric_tasks._choose_option` needs of a registered scene."""

    def __init__(self, points: ScenePoints, camera: ViewCamera, record: Registration):
        self.points, self.camera, self.record = points, camera, record


def solve_translation_rotation(images: Sequence[Any], rec: Reconstruction | None = None,
                               target: Reconstruction | None = None) -> SpatialAnswer:
    """T5 from the pictures: infer (move, roll) on the reference reconstruction, apply it to the target's."""
    images = G._check_images(images, T.TRANSLATION_ROTATION)
    rec, sp, cam, reg = _front(images[:4], rec)
    target, tsp, tcam, treg = _front(images[4:7], target)
    pairs = move_roll_pairs()
    an = image_analysis(images[3], sp.names)
    costs = score_candidates(an, sp, cam, pairs, refine_top=REFINE_TOP)
    out = G._choose_option(T.TRANSLATION_ROTATION, _Reg(sp, cam, reg), an, pairs, costs, _Reg(tsp, tcam, treg),
                           images[7:11], 1, [], [treg])
    return replace(out, details={**out.details, **_details(rec), "target_reconstruction": target.summary()})


def solve_rotation_rotation(images: Sequence[Any], rec: Reconstruction | None = None) -> SpatialAnswer:
    """T6 from the pictures: infer the two rolls on the reconstruction, apply them again, pick the option."""
    images = G._check_images(images, T.ROTATION_ROTATION)
    rec, sp, cam, reg = _front(images, rec)
    pairs = roll_pairs(T.ROTROT_GRID)
    an = image_analysis(images[3], sp.names)
    costs = score_candidates(an, sp, cam, pairs, refine_top=REFINE_TOP)
    R = _Reg(sp, cam, reg)
    out = G._choose_option(T.ROTATION_ROTATION, R, an, pairs, costs, R, images[4:8], 2, [], [])
    return replace(out, details={**out.details, **_details(rec)})


# ----------------------------------------------------------------------------- docking


def _pose_score(lig: np.ndarray, lig_polar: np.ndarray, tree: cKDTree, polar_tree: cKDTree | None) -> float:
    """Higher is better: pocket contacts of the ligand atoms, minus clashes, plus possible H-bonds."""
    d, _ = tree.query(lig)
    clash = float(np.sum(np.clip(CLASH_A - d, 0, None) ** 2))
    contact = float(np.mean([len(n) for n in tree.query_ball_point(lig, CONTACT_A)]))
    hb = 0.0
    if polar_tree is not None and lig_polar.any():
        dp, _ = polar_tree.query(lig[lig_polar])
        hb = float(np.count_nonzero((dp > 2.5) & (dp < HBOND_A)))
    return contact - 4.0 * clash + 1.0 * hb


def solve_docking(images: Sequence[Any], pocket: Reconstruction | None = None,
                  ligand: Reconstruction | None = None) -> SpatialAnswer:
    """T7 from the pictures: the roll about the ligand's centre and the move along x that dock the
    reconstructed displaced ligand into the reconstructed pocket.

    The pocket (images 1-3) and the displaced ligand (images 4-6) are reconstructed each in its
    own frame; image 7 (both, front view) places them together: the pocket's points are
    registered to it (its camera), then the ligand's to the pixels the pocket leaves
    unexplained. Every roll of the grid (about the ligand's centre) and every whole-Å x-move
    is scored by the pocket contacts of the ligand's atoms, clashes and possible H-bonds
    (:func:`_pose_score`); the best pose's commands are the answer.
    """
    images = G._check_images(images, T.DOCKING)
    pocket = pocket if pocket is not None else reconstruct(views_of(images[0:3]))
    ligand = ligand if ligand is not None else reconstruct(views_of(images[3:6]))
    psp = cloud_points(pocket, which="pocket")
    lsp = cloud_points(ligand, which="all")
    an7 = image_analysis(images[6], tuple(dict.fromkeys(psp.names + lsp.names)))
    cam7 = register_free_shift(an7, psp, ViewCamera(an7.width, an7.height), POCKET_CLASSES)
    rest = unexplained(an7, psp, cam7)
    cam0 = ViewCamera(an7.width, an7.height)
    start = moment_shift(rest, lsp, cam0, ["LIGAND_C"] if "LIGAND_C" in lsp.names else None)  # grey: only the ligand
    balls = [b for b in find_balls(an7) if b.color_class == "LIGAND_C"]
    ys, xs = np.nonzero(an7.pixels.mask("LIGAND_C")) if hasattr(an7, "pixels") else (np.zeros(0), np.zeros(0))
    grey = lsp.points[np.array([lsp.names[c] for c in lsp.cls]) == "LIGAND_C"]
    if len(balls) < 2 and len(xs) >= 10 and len(grey) >= 3:
        # no balls seen in image 7: the grey (ligand-carbon) pixels' centroid gives the ligand's direction and
        # their spread, against the spread of its grey points at a reference depth, its depth
        pix = np.column_stack([xs + 0.5, ys + 0.5])
        c = lsp.center
        ref = cam0.with_shift((-c[0], -c[1], -c[2] - 50.0))
        uv, _ = ref.project(grey)
        spread_pred = np.sqrt(((uv - uv.mean(0)) ** 2).sum(1).mean())
        spread_img = np.sqrt(((pix - pix.mean(0)) ** 2).sum(1).mean())
        depth = 50.0 * spread_pred / max(spread_img, 1e-6)
        cu, cv = pix.mean(0) - np.array([cam0.width / 2.0, cam0.height / 2.0])
        start = np.array([cu * depth / cam0.focal - c[0], -cv * depth / cam0.focal - c[1], -c[2] - depth])
    if len(balls) >= 2:  # the ligand's grey balls in image 7: their size gives its depth, their place its direction
        depth = float(np.median([cam0.focal * BALL_RADIUS_A / b.radius for b in balls]))
        cu = float(np.mean([b.x for b in balls])) - cam0.width / 2.0
        cv = float(np.mean([b.y for b in balls])) - cam0.height / 2.0
        c = lsp.center
        start = np.array([cu * depth / cam0.focal - c[0], -cv * depth / cam0.focal - c[1], -c[2] - depth])
    lcam = refine_shift(rest, lsp, cam0.with_shift(start), taus=FREE_ICP_TAUS)
    # both in image 7's camera frame. The ligand's Å scale comes from its balls; the pocket alone shows no
    # balls, so its scale is set by putting its centroid at the ligand's depth in image 7 (a bound ligand sits
    # inside its pocket; it was moved along x only): scaling the registered pocket about the camera keeps
    # its image and fixes its size.
    lig_atoms = ligand.coords[ligand.is_ligand] if ligand.is_ligand.any() else lsp.points
    lig_cls = ligand.classes[ligand.is_ligand] if ligand.is_ligand.any() else np.array([lsp.names[c] for c in lsp.cls])
    lig_pts = lig_atoms + np.asarray(lcam.shift)
    pocket_pts = psp.points + np.asarray(cam7.shift)
    depth_l = -float(lig_pts[:, 2].mean())
    depth_p = -float(pocket_pts[:, 2].mean())
    k_scale = depth_l / depth_p if depth_p > 1e-6 and depth_l > 1e-6 else 1.0
    if "ball" not in pocket.scale_source:
        pocket_pts = pocket_pts * k_scale
    centre = lig_pts.mean(axis=0)
    pnames = np.array([psp.names[c] for c in psp.cls])
    tree = cKDTree(pocket_pts)
    polar = np.isin(pnames, ["O", "N"])
    polar_tree = cKDTree(pocket_pts[polar]) if polar.any() else None
    lig_polar = np.isin(lig_cls, ["O", "N"])
    shifts = [float(v) for v in T.DOCKING_SHIFT_GRID.values()]
    pocket_centre = pocket_pts.mean(axis=0)  # a pocket is the residues around its ligand: the bound ligand is near its centre
    hyps, scores = [], []
    for r in rolls(T.DOCKING_ROLL_GRID):
        turned = lig_pts if r is None else (lig_pts - centre) @ compose_rigid([r], np.zeros(3))[0].T + centre
        for s in shifts:
            hyps.append((r, s))
            prior = POCKET_CENTRE_WEIGHT * abs(centre[0] + s - pocket_centre[0])
            toward = np.sign(s) == np.sign(pocket_centre[0] - centre[0])
            scores.append(_pose_score(turned + np.array([s, 0.0, 0.0]), lig_polar, tree, polar_tree) - prior
                          - (0.0 if toward else 1e3))
    scores = np.array(scores)

    def answer_of(h) -> str:
        r, s = h
        cmds = ([Command("roll", r.axis, r.value)] if r is not None else []) + [Command("move", "x", s)]
        return format_commands(cmds)

    ranking = rank(hyps, -scores, answer_of=answer_of, text_of=answer_of)
    rec_p = _record(an7, psp, cam7, pocket)
    fit = {"matched": rec_p.matched, "explained": rec_p.explained, "chamfer": rec_p.chamfer_px, "ok": rec_p.ok}
    details = {"grounding": "images", "pocket_reconstruction": pocket.summary(), "pocket_scale_factor": round(k_scale, 3),
               "pocket_minus_ligand_x": round(float(pocket_centre[0] - centre[0]), 2),
               "ligand_reconstruction": ligand.summary(), "ligand_camera_shift": [round(float(v), 2) for v in lcam.shift]}
    return G._answer(T.DOCKING, ranking, [rec_p], [fit], details,
                     ["docked by contacts and clashes against the reconstructed pocket (no structure)"], 1.0)


# ----------------------------------------------------------------------------- interaction location


def _element(atom_name: str) -> str:
    a = str(atom_name).strip().upper()
    return "N" if a.startswith("N") else "O" if a.startswith("O") else a[:1]


def find_bond_atoms(rec: Reconstruction, images: Mapping[str, Any], bond: Mapping[str, Any]
                    ) -> tuple[int | None, int | None, str]:
    """Reconstruction indices of the named bond's ligand atom and residue atom (None where not found).

    Names come from the labels of every view, decoded under chemical constraints by
    :mod:`misi_agent.tools.identity` (ligand atom names voted across views; residue atoms named by
    their residue's template, residues by their labels and the peptide links).
    """
    try:
        from misi_agent.tools.identity import identify_ligand, identify_residues
        from misi_agent.tools.image_hbonds import read_all_labels
    except ImportError:  # the label reader is not installed
        return None, None, "no label reader"
    try:
        labels = read_all_labels(images)
        lig_id = identify_ligand(rec, labels)
    except Exception as exc:  # a reader failure leaves the names unknown
        return None, None, f"labels not read ({type(exc).__name__})"
    want = str(bond.get("ligand_atom", "")).strip().upper()
    hits = [k for k, n in lig_id.names.items() if str(n).upper() == want]
    i = hits[0] if hits else None
    j = None
    try:
        residues = identify_residues(rec, labels)
    except Exception:  # residue names unknown: the partner is found by distance
        residues = []
    number = str(bond.get("residue_number", "")).strip()
    atom = str(bond.get("residue_atom", "")).upper()
    el = _element(atom)
    for r in residues:
        if r.name == str(bond.get("residue_name", "")).upper() and f"{r.number}{r.ins_code}" == number:
            got = [k for k, n in r.atom_names.items() if str(n).upper() == atom]
            if not got and i is not None:  # the residue is known but not its atom's name: its atom of the element nearest the ligand atom
                same = [k for k in r.atoms if str(rec.classes[k]) == el]
                got = sorted(same, key=lambda k: float(np.linalg.norm(rec.coords[k] - rec.coords[i])))[:1]
            if got:
                j = got[0]
                break
    how = (f"ligand atom {want} {'named by its label' if i is not None else 'not found among the labels'}; residue "
           f"atom {'named by its residue template' if j is not None else 'not identified'}")
    return i, j, how


def locate_interaction(images: Sequence[Any], bond: Mapping[str, Any], options: Mapping[str, str],
                       rec: Reconstruction | None = None) -> SpatialAnswer:
    """T8 from the pictures: the option that brings the named bond's midpoint onto the line of sight.

    The ligand atom is found by its label (:func:`find_ligand_atom`); failing that, every
    reconstructed ligand atom of the named element is a candidate. The residue atom is the
    nearest reconstructed pocket point of its element. Each option's cost is its distance (Å)
    to the move that centres the best candidate's midpoint.
    """
    images = G._check_images(images, T.INTERACTION_LOCATION)
    letters = [L for L in T.CHOICE_LETTERS if L in options]
    if len(letters) != len(T.CHOICE_LETTERS):
        raise G.SpatialTaskError("interaction location needs the four options A-D")
    views = views_of(images, T.VIEWS6)
    rec = rec if rec is not None else reconstruct(views)
    sp = cloud_points(rec)
    an0 = image_analysis(images[0], sp.names)
    cam = ViewCamera(an0.width, an0.height)
    reg = _record(an0, sp, cam, rec)
    lig_el = _element(bond.get("ligand_atom", ""))
    res_el = _element(bond.get("residue_atom", ""))
    i, jres, how = find_bond_atoms(rec, views, bond)
    lig = np.flatnonzero(rec.is_ligand)
    cands = [i] if i is not None else [int(k) for k in lig if rec.classes[k] == lig_el] or [int(k) for k in lig]
    pocket_cloud = cloud_points(rec, max_points=10 ** 6, which="pocket")
    pocket_pts = pocket_cloud.points[np.array([pocket_cloud.names[c] for c in pocket_cloud.cls]) == res_el] \
        if len(pocket_cloud.points) else np.zeros((0, 3))
    moves_ = [G._net_xy(options[L]) for L in letters]
    best = None
    for k in cands:
        a = rec.coords[k]
        if jres is not None and np.linalg.norm(rec.coords[jres] - a) <= PARTNER_MAX_A:
            b = rec.coords[jres]
        elif len(pocket_pts):  # the partner: the nearest pocket point of the named element
            d, j = cKDTree(pocket_pts).query(a)
            b = pocket_pts[j]
        else:
            b = a
        mid = (a + b) / 2.0
        need = (-float(mid[0]), -float(mid[1]))
        dist = np.array([np.hypot(x - need[0], y - need[1]) for x, y in moves_])
        if best is None or dist.min() < best[0].min():
            best = (dist, need, k)
    dist, need, k = best
    method = "nearest partner"
    if len(pocket_pts):
        # each option implies where the partner must be seen (x, y): 2·midpoint − ligand atom; an option
        # is consistent when a pocket point of the partner's element lies there at H-bond distance (over
        # the candidate ligand atoms when the label was not matched)
        cons = np.full(len(moves_), np.inf)
        for k in cands:
            a = rec.coords[k]
            r = np.linalg.norm(pocket_pts - a, axis=1)
            shell = pocket_pts[(r >= HBOND_SHELL_A[0]) & (r <= HBOND_SHELL_A[1])]
            if len(shell):
                cons = np.minimum(cons, [np.min(np.hypot(shell[:, 0] - (-2 * x - a[0]), shell[:, 1] - (-2 * y - a[1])))
                                         for x, y in moves_])
        if cons.min() <= OPTION_MATCH_A:
            dist, method = cons, "option consistent with a partner at H-bond distance"
    ranking = rank(letters, dist)
    notes = [] if i is not None else [f"the ligand atom's label was not matched ({how}); chose among {len(cands)} "
                                      "candidate atoms: answer unsure"]
    fit = {"matched": reg.matched, "explained": reg.explained, "chamfer": reg.chamfer_px, "ok": reg.ok and i is not None}
    details = {"needed_move": f"move x {need[0]:.2f}, move y {need[1]:.2f}", "ligand_atom_found_by": how,
               "option_chosen_by": method,
               "option_moves": {L: list(m) for L, m in zip(letters, moves_)}, **_details(rec)}
    return G._answer(T.INTERACTION_LOCATION, ranking, [reg], [fit], details, notes, G.SURE_MARGIN_A)


SOLVERS = {
    T.TRANSLATION: solve_translation,
    T.ROTATION: solve_rotation,
    T.ZOOMING: solve_zoom,
    T.TRANSLATION_ROTATION: solve_translation_rotation,
    T.ROTATION_ROTATION: solve_rotation_rotation,
    T.DOCKING: solve_docking,
    T.INTERACTION_LOCATION: locate_interaction,
}
