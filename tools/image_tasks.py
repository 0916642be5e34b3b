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

Interaction location needs the named atoms. Oxygen and nitrogen share their colours, so the
ligand's N/O are the reconstructed ligand atoms of the element and the N/O bonded to (or at
bonding distance of) a ligand atom; each is judged by how far it is seen from the labels read as
the named ligand atom in every view, and by the name :mod:`misi_agent.tools.identity` gives it.
The residue atom is a pocket atom of the named element at H-bond distance (2.3-3.8 Å) of the
ligand atom, judged by how far it lies beyond the named atom's reach (from the CA, where the
residue's label is anchored) from the labels read as the named residue, and by its template name.
Where no rebuilt atom carries the ligand atom's name and its labels, read or spotted in several views,
meet away from the atom the labels pointed to, the atom is placed where they meet
(:mod:`misi_agent.tools.label_triangulation`): PyMOL hides many ligand balls under its labels.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

from misi_agent.bench import tasks as T
from misi_agent.camera import Command, compose_rigid, format_commands
from misi_agent.tools import geometric_tasks as G
from misi_agent.tools.atom_detection import POCKET_CLASSES, as_rgb, find_balls
from misi_agent.tools.command_search import REFINE_TOP, move_roll_pairs, moves, rank, roll_pairs, rolls, score_candidates
from misi_agent.tools.reconstruction import BALL_RADIUS_A, BALL_SCALE_SOURCE, Reconstruction, load_views, reconstruct
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
HBOND_IDEAL_A = 2.9  # Å: the typical donor–acceptor distance of an H-bond
NAME_BONUS_A = 0.6  # Å: a partner named as the question names it by its residue template counts as this much nearer the ideal
GROUP_BONUS_A = 0.4  # Å: a partner in the residue group identified as the named residue (label read, or its template
# fitted) counts as this much nearer the ideal, whatever atom name the template gave it
PAIR_TIE_A = 0.5  # Å: with the ligand atom unknown, pairs this close to the cheapest are all kept
LIGAND_BOND_A = 2.0  # Å: an N/O this close to a ligand atom is bonded to it (the ligand's, whatever its colour says):
# bonds to N/O are ≤ 1.5 Å plus the reconstruction's error; no pocket heavy atom comes this close (H-bonds ≥ 2.5 Å)
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


def _scene_camera(images: Sequence[Any], rec: Reconstruction) -> tuple[ScenePoints, ViewCamera, Any]:
    """The reconstruction's matchable points, the benchmark camera of the pictures and image 1's analysis."""
    sp = cloud_points(rec)
    an0 = image_analysis(images[0], sp.names)
    return sp, ViewCamera(an0.width, an0.height), an0


def _front(images: Sequence[Any], rec: Reconstruction | None) -> tuple[Reconstruction, ScenePoints, ViewCamera, Registration]:
    rec = rec if rec is not None else reconstruct(views_of(images[:3]))
    sp, cam, an0 = _scene_camera(images, rec)
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

    The after-image fixes the share ρ = d / D of the camera distance D the scene came closer, whatever the Å scale
    (:func:`zoom_ratio`: with the true D, ρ · D lands in the right 1 Å bin on 50 of 50 items of either renderer);
    d in Å needs D within about 1 %. Where no reconstruction is passed in, the residue labels give D first
    (:func:`_zoom_labels`): PyMOL draws each at its CA, two consecutive CAs lie one CA–CA step apart, and the
    labels of the initial views and of image 4 (a fourth camera ρ · D ahead of the front one, where the zoomed
    labels stand clear of each other) are triangulated together. Where they do not rule, the after-image's ligand
    balls are drawn 2-3 times larger than in the initial views and their apparent size (measured to a fraction of a
    pixel, :func:`subpixel_ball_radius`) gives the scale: each ball matched to a reconstructed ligand atom at
    normalised depth t gives D = f·r / (r_px · (t − ρ)); the median rescales the reconstruction and the candidates
    are scored again (PyMOL 0 → 42 → 72 on 50 test items with the labels of the initial views, then of image 4;
    raster 42, its labels moved beside their atoms; ``eval/results/zoom_scale.md``). Where no balls give a scale
    either (PyMOL piles its labels on the ligand, most of all in small pictures), a group of 1–3 agreeing label
    pairs is taken, within :data:`ZOOM_WEAK_RANGE` of the reconstruction's own scale: PyMOL 10 → 25 on 20 items at
    384 px (1–3 agreeing pairs were 0.95–1.02 of the true distance, the reconstruction's own scale 0.46–1.34); no
    change on the 50 PyMOL items at 512 px (74) nor on raster (42, its balls rule). The labels are placed to a
    fraction of a pixel (:func:`~misi_agent.tools.label_spotting.with_refined_residue_centres`): PyMOL 74 → 86 at
    512 px (50 items), 25 → 70 at 384 px (20); what is left is mostly the CA–CA step of REFMAC entries.
    """
    images = G._check_images(images, T.ZOOMING)
    ruler = rec is None  # a reconstruction passed in keeps its scale (an oracle's is exact)
    rec = rec if rec is not None else reconstruct(views_of(images[:3]))
    values = list(T.ZOOM_GRID.values())
    candidates = [[Command("move", "z", v)] for v in values]
    rho = zoom_ratio(images, rec)
    if ruler:
        from misi_agent.tools.label_triangulation import consecutive_label_steps, ruler_distance

        steps = consecutive_label_steps(rec, *_zoom_labels(images, rec, rho))  # triangulated once, decided twice
        D, source = ruler_distance(steps, ZOOM_RULER_MIN_SHARE)
        if D is not None:
            return _unit(T.ZOOMING, images, candidates, _at_distance(rec, D, f"{source} (the ligand gave "
                                                                             f"{rec.distance:.1f} A)"))
        rec = replace(rec, notes=tuple(rec.notes) + (source,))
    D = _after_ball_distance(images, rec, rho) if rho is not None else None
    known = not rec.scale_source.startswith("default")  # a default scale may be far off: accept any estimate
    if D is not None and (not known or 0.8 * rec.distance <= D <= 1.25 * rec.distance):
        return _unit(T.ZOOMING, images, candidates,
                     _at_distance(rec, D, rec.scale_source + "; refined by the after-image's ligand balls"))
    if ruler:  # no balls to measure: a smaller group of agreeing label pairs beats the reconstruction's own scale
        D, source = ruler_distance(steps, ZOOM_RULER_MIN_SHARE, min_pairs=1)
        lo, hi = ZOOM_WEAK_RANGE
        if D is not None and (not known or lo * rec.distance <= D <= hi * rec.distance):
            return _unit(T.ZOOMING, images, candidates, _at_distance(
                rec, D, f"{source}, too few to rule where the after-image's balls could (the ligand gave "
                        f"{rec.distance:.1f} A)"))
    return _unit(T.ZOOMING, images, candidates, rec)


ZOOM_RULER_MIN_SHARE = 0.6  # zooming takes the residue labels' scale only when this share of their pairs (those not
# too far apart to be chain neighbours) agree
ZOOM_WEAK_RANGE = (0.5, 2.0)  # a label group smaller than RULER_MIN_PAIRS is taken only within this share of the
# reconstruction's own scale (where that scale is known): on raster pictures such groups gave 0.28-1.62 x the truth


def _zoom_labels(images: Sequence[Any], rec: Reconstruction, rho: float | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The residue labels the zooming ruler triangulates (:func:`_residue_labels`) and the cameras of the views that
    are not canonical: with ``rho`` (d / D, from :func:`zoom_ratio`) image 4 is a fourth view, the front camera moved
    ``rho`` of the way in (:func:`~misi_agent.tools.label_triangulation.dolly_camera`). Each residue label's centre
    is refined to a fraction of a pixel by its whole text's template
    (:func:`~misi_agent.tools.label_spotting.with_refined_residue_centres`).

    Zooming's 1 Å bins need the distance within about 1 %; PyMOL's ball edges (shaded darker at the rim) put its
    ball ruler 5–12 % long (``eval/results/zoom_scale.md``). The labels of the three initial views ruled 31 of 50
    PyMOL items; with image 4, whose labels are drawn as large as before over a scene 1.5–4 times larger and so
    stand clear of each other, 48 (49 with pairs too far apart to be chain neighbours set aside; 4–23 agreeing
    pairs), their distance −1.7 … +0.8 % of the truth (10th–90th percentile). What is left is chemistry: the mean
    CA–CA step differs by refinement program (3.805 Å in most entries, 3.85 Å in a third, most of them refined with
    REFMAC), which the pictures cannot tell. The labels are drawn at a fixed size: at 768 px PyMOL zooming scored 95
    on 20 items, at 384 px 10 (labels piled, 7 of 20 ruled). The raster renderer moves its labels beside their
    atoms; with the initial views alone, where its pairs still formed a group (4 of 50 zoom items), it held 42–43 %
    of them and was up to 4 % off, worse than its balls (σ 1.6 %), hence :data:`ZOOM_RULER_MIN_SHARE` over the
    default 40 % (with image 4: refused on all 50). Image 4 is read only where ``rho`` was measured (not clipped at
    an end of :data:`ZOOM_RATIOS`)."""
    from misi_agent.tools.label_triangulation import dolly_camera

    views = views_of(images[:3])
    cams = {}
    if rho is not None:
        views["after"] = images[3]
        cams["after"] = dolly_camera(rec, rho)
    return _residue_labels(views, refined=True), cams


def _residue_labels(images_by_view: Mapping[str, Any], refined: bool = False) -> dict[str, Any]:
    """Every view's labels as read, plus the residue labels the reader missed in PyMOL's piles, spotted by their
    known names (:func:`~misi_agent.tools.label_spotting.with_hidden_residue_labels`): what the residue-label
    ruler triangulates (zooming, the docking pocket). ``refined``: each residue label's centre to a fraction of a pixel
    (:func:`~misi_agent.tools.label_spotting.with_refined_residue_centres`, with the same spotters)."""
    from misi_agent.tools.image_hbonds import read_all_labels
    from misi_agent.tools.label_spotting import spotters, with_hidden_residue_labels, with_refined_residue_centres

    read = read_all_labels(images_by_view)
    sp = spotters(images_by_view, read)
    labels = with_hidden_residue_labels(images_by_view, read, sp=sp)
    return with_refined_residue_centres(images_by_view, labels, sp=sp) if refined else labels


def _at_distance(rec: Reconstruction, D: float, source: str) -> Reconstruction:
    """``rec`` scaled about its centre and put ``D`` Å in front of the camera: the same picture at another Å scale."""
    k = D / rec.distance
    return replace(rec, coords=(rec.coords - rec.center) * k + np.array([0.0, 0.0, -D]),
                   cloud=(rec.cloud - rec.center) * k + np.array([0.0, 0.0, -D]), distance=D, scale_source=source)


ZOOM_RATIOS = np.round(np.arange(0.20, 0.951, 0.01), 2)  # d / D tried by :func:`zoom_ratio` (some d of 40..60 Å fits
# any camera distance of 42..300 Å)


def zoom_ratio(images: Sequence[Any], rec: Reconstruction) -> float | None:
    """d / D of the zoom that best predicts image 4, whatever the reconstruction's Å scale: the scene moved a share
    ``ρ`` of its camera distance closer looks the same at any scale, so the shares :data:`ZOOM_RATIOS` are scored
    (the reconstruction moved ``ρ · rec.distance``) and the best refined by a parabola through its neighbours. The
    candidates of the answer (40..60 Å at the reconstruction's scale) would clip ``ρ`` where that scale is off."""
    sp, cam, _ = _scene_camera(images, rec)  # no registration record: only the costs are wanted
    an = image_analysis(images[3], sp.names)
    costs = np.asarray(score_candidates(an, sp, cam, [[Command("move", "z", float(k * rec.distance))]
                                                      for k in ZOOM_RATIOS]), float)
    if not np.isfinite(costs).any():
        return None
    j = int(np.nanargmin(costs))
    if j in (0, len(costs) - 1):  # the best at an end of the grid: clipped, not measured
        return None
    best = float(ZOOM_RATIOS[j])
    lo, c, hi = costs[j - 1], costs[j], costs[j + 1]
    den = lo - 2 * c + hi
    if np.isfinite(den) and den > 1e-12:
        best += float(ZOOM_RATIOS[1] - ZOOM_RATIOS[0]) * float(np.clip(0.5 * (lo - hi) / den, -0.5, 0.5))
    return best


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


def _pocket_at_label_scale(images_by_view: Mapping[str, Any]) -> Reconstruction:
    """T7's pocket rebuilt from its views, at the camera distance its residue labels give where they give one
    (:func:`~misi_agent.tools.label_triangulation.rescaled_by_residue_labels`: PyMOL draws a residue's label at
    its CA, and consecutive CAs lie 3.81 Å apart). The pocket views show no ligand, so no balls give its scale
    otherwise. The labels the reader missed in PyMOL's piles are spotted by their known names first
    (:func:`_residue_labels`)."""
    from misi_agent.tools.label_triangulation import rescaled_by_residue_labels

    views = load_views(images_by_view)
    rec = reconstruct(images_by_view, views=views)
    return rescaled_by_residue_labels(images_by_view, views, rec, _residue_labels(images_by_view))


def solve_docking(images: Sequence[Any], pocket: Reconstruction | None = None,
                  ligand: Reconstruction | None = None) -> SpatialAnswer:
    """T7 from the pictures: the roll about the ligand's centre and the move along x that dock the
    reconstructed displaced ligand into the reconstructed pocket.

    The pocket (images 1-3) and the displaced ligand (images 4-6) are reconstructed each in its
    own frame, the pocket at its residue labels' scale where they give one (:func:`_pocket_at_label_scale`; 50 test
    items, PyMOL 45.82 → 50.33, raster 59.64 → 59.49 → 60.49 with label pairs too far apart to be chain neighbours set
    aside, ``eval/results/label_spotting.md``, ``zoom_scale.md``); image 7 (both, front
    view) places them together: the pocket's points are registered to it (its camera), then the ligand's to the
    pixels the pocket leaves unexplained. Every roll of the grid (about the ligand's centre) and every whole-Å
    x-move is scored by the pocket contacts of the ligand's atoms, clashes and possible H-bonds
    (:func:`_pose_score`); the best pose's commands are the answer.
    """
    from misi_agent.tools.label_triangulation import scale_ruled_by_labels

    images = G._check_images(images, T.DOCKING)
    pocket = pocket if pocket is not None else _pocket_at_label_scale(views_of(images[0:3]))
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
    # balls, so unless its residue labels gave its scale, it is set by putting its centroid at the ligand's depth
    # in image 7 (a bound ligand sits inside its pocket; it was moved along x only): scaling the registered pocket
    # about the camera keeps its image and fixes its size. Where the labels gave the pocket's scale, the ligand
    # (whose balls hide under PyMOL's labels) is scaled to the pocket's depth instead.
    lig_atoms = ligand.coords[ligand.is_ligand] if ligand.is_ligand.any() else lsp.points
    lig_cls = ligand.classes[ligand.is_ligand] if ligand.is_ligand.any() else np.array([lsp.names[c] for c in lsp.cls])
    lig_pts = lig_atoms + np.asarray(lcam.shift)
    pocket_pts = psp.points + np.asarray(cam7.shift)
    depth_l = -float(lig_pts[:, 2].mean())
    depth_p = -float(pocket_pts[:, 2].mean())
    k_scale = depth_l / depth_p if depth_p > 1e-6 and depth_l > 1e-6 else 1.0
    if scale_ruled_by_labels(pocket):
        lig_pts = lig_pts / k_scale
    elif "ball" not in pocket.scale_source:
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


# reach (Å) from a residue's CA, where its label is anchored, to the named atom; side-chain atoms not listed: REACH_DEFAULT_A
ATOM_REACH_A = {"N": 1.5, "O": 2.5, "OXT": 2.5, "OG": 2.5, "OG1": 2.5, "SG": 2.9, "OD1": 3.7, "OD2": 3.7, "ND2": 3.7,
                "ND1": 3.7, "OE1": 4.9, "OE2": 4.9, "NE2": 4.9, "NE": 5.0, "NE1": 4.7, "NZ": 6.5, "NH1": 7.3, "NH2": 7.3,
                "OH": 6.6, "SD": 4.1}
REACH_DEFAULT_A = 7.5
LABEL_SLACK_H = 2.0  # label heights: how far outside its anchor a residue label may be drawn


@dataclass(frozen=True)
class BondCandidates:
    """Where the named H-bond's two atoms may be in a reconstruction.

    ``ligand``: the ligand's atoms of the named atom's element (reconstruction index -> prior
    cost, Å-like, lower is likelier): how far (Å) each is seen from the labels read as the named
    atom, less :data:`NAME_BONUS_A` for the atom the label votes of
    :func:`misi_agent.tools.identity.identify_ligand` name so; ``ligand_named`` when either
    evidence exists (then only the cheapest is used). ``residue``: every pocket atom of the
    residue atom's element with its prior cost: how far it lies beyond the named atom's reach
    from the named residue's label in the views where that label was read, less
    :data:`NAME_BONUS_A` when the residue template names it as the question does.
    """

    ligand: Mapping[int, float]
    ligand_named: bool
    residue: Mapping[int, float]
    how: str
    ligand_voted: bool = False  # identity's label votes name a rebuilt atom as the question's ligand atom


def _residue_label_boxes(labels: Mapping[str, Any], name: str, number: str) -> dict[str, list[tuple[int, int, int, int]]]:
    """Per view, the boxes of the labels read as the named residue (number exact, name at most one letter off)."""
    out: dict[str, list] = {}
    for view, labs in labels.items():
        for lab in labs.of_kind("residue"):
            words = str(lab.reading or lab.text or "").split()
            if len(words) == 2 and words[1] == number and len(words[0]) == len(name) and \
                    sum(x != y for x, y in zip(words[0], name)) <= 1:
                out.setdefault(view, []).append(tuple(lab.box))
    return out


def _ligand_label_boxes(labels: Mapping[str, Any], name: str) -> dict[str, list[tuple[int, int, int, int]]]:
    """Per view, the boxes of the ligand labels read as ``name``."""
    out: dict[str, list] = {}
    for view, labs in labels.items():
        for lab in labs.of_kind("ligand"):
            if str(lab.reading or lab.text or "").strip().upper() == name:
                out.setdefault(view, []).append(tuple(lab.box))
    return out


def _label_excess(rec: Reconstruction, atoms: Sequence[int], boxes: Mapping[str, list], reach_a: float) -> np.ndarray:
    """Mean over the views with the residue's label of how far (Å) each atom is seen beyond ``reach_a`` from it."""
    if not boxes or not len(atoms):
        return np.zeros(len(atoms))
    f_px = rec.image_size[0] / 2.0 / np.tan(np.radians(15.0))  # the benchmark camera: 30° field of view
    px_per_a = f_px / rec.distance
    tot, cnt = np.zeros(len(atoms)), np.zeros(len(atoms))
    for view, bs in boxes.items():
        xy = np.asarray(rec.image_xy.get(view), float)[list(atoms)]
        seen = np.isfinite(xy).all(axis=1)
        if not seen.any():
            continue
        slack = LABEL_SLACK_H * float(np.median([b[3] - b[1] for b in bs]))
        d = np.min([np.where(seen, _box_px(xy, b), np.inf) for b in bs], axis=0)
        ex = np.maximum(0.0, d - slack) / px_per_a - reach_a
        tot[seen] += np.maximum(0.0, ex[seen])
        cnt[seen] += 1
    return np.where(cnt > 0, tot / np.maximum(cnt, 1), 0.0)


def _box_px(xy: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    x0, y0, x1, y1 = box
    dx = np.maximum(np.maximum(x0 - xy[:, 0], 0), xy[:, 0] - x1)
    dy = np.maximum(np.maximum(y0 - xy[:, 1], 0), xy[:, 1] - y1)
    return np.hypot(dx, dy)


def _spotted(boxes: Mapping[str, list], spotters: Mapping[str, Mapping[str, Any]] | None, kind: str, text: str
             ) -> tuple[dict[str, list], int]:
    """``boxes`` plus, in each view where the text was not read, the place where it was spotted
    (:mod:`misi_agent.tools.label_spotting`: a label hidden in a pile of others); and how many views that added."""
    out = {v: list(b) for v, b in boxes.items()}
    added = 0
    for view, kinds in (spotters or {}).items():
        if view in out or kind not in kinds:
            continue
        found = kinds[kind].spot(text, max_spots=1)
        if found:
            out[view] = [found[0].box]
            added += 1
    return out, added


def bond_candidates(rec: Reconstruction, labels: Mapping[str, Any], bond: Mapping[str, Any],
                    spotters: Mapping[str, Mapping[str, Any]] | None = None) -> BondCandidates:
    """Candidate atoms of the named bond from the labels of every view (no structure, no metadata).

    Ligand atom names are voted across views by :func:`misi_agent.tools.identity.identify_ligand`;
    a name found on an atom of another element is a misreading, and the atoms of the right
    element next to it stand in. Residue atoms are judged by where the named residue's label
    (anchored at its CA) is drawn in each view and by their names from the residue template
    (:func:`misi_agent.tools.identity.identify_residues`). Pocket atoms bonded to a ligand atom
    are the ligand's own N/O misassigned and are left out.

    In a view where the reader did not read the named residue's or ligand atom's label, ``spotters``
    (:func:`misi_agent.tools.label_spotting.spotters`) look for its known text in the pile of labels,
    and a place found counts as a read (PyMOL T8, 50 items: 80 → 84; raster unchanged at 100).
    """
    from misi_agent.tools.identity import identify_ligand, identify_residues

    lig_el = _element(bond.get("ligand_atom", ""))
    res_el = _element(bond.get("residue_atom", ""))
    classes = np.asarray(rec.classes).astype(str)
    is_lig = np.asarray(rec.is_ligand, bool)
    bonded_to_ligand = set()  # O/N share their colour: those bonded to a ligand carbon are the ligand's
    for x, y in np.asarray(rec.bonds, int).reshape(-1, 2):
        if is_lig[x] != is_lig[y]:
            bonded_to_ligand.add(int(y if is_lig[x] else x))
    if is_lig.any():  # and those at bonding distance of a ligand atom even where no bond was drawn between them
        near_lig = cKDTree(rec.coords[is_lig]).query(rec.coords)[0] <= LIGAND_BOND_A
        bonded_to_ligand |= {int(k) for k in np.flatnonzero(near_lig & ~is_lig) if classes[k] in ("N", "O")}
    lig_all = sorted(set(np.flatnonzero(is_lig).tolist()) | bonded_to_ligand)
    lig_of_el = [int(k) for k in lig_all if classes[k] == lig_el] or [int(k) for k in lig_all]
    want = str(bond.get("ligand_atom", "")).strip().upper()
    named = None
    try:
        lig_id = identify_ligand(rec, labels)
        hits = [k for k, n in lig_id.names.items() if str(n).upper() == want]
        named = hits[0] if hits else None
    except Exception:  # a reader failure leaves the names unknown; the labels' places still count
        pass
    lig_boxes, lig_spotted = _spotted(_ligand_label_boxes(labels, want), spotters, "ligand", want)
    lig_prior = dict(zip(lig_of_el, _label_excess(rec, lig_of_el, lig_boxes, 0.0).tolist()))
    if named in lig_prior:
        lig_prior[named] -= NAME_BONUS_A
    ligand_named = bool(lig_boxes) or named in lig_prior
    how_lig = (f"ligand atom {want}: {'named by identity' if named in lig_prior else 'not named by identity'}, "
               f"its label read in {len(lig_boxes) - lig_spotted} view(s), spotted in {lig_spotted} more")
    name = str(bond.get("residue_name", "")).strip().upper()
    number = str(bond.get("residue_number", "")).strip()
    atom = str(bond.get("residue_atom", "")).strip().upper()
    pocket = [int(k) for k in np.flatnonzero((np.asarray(rec.residue) >= 0) & (classes == res_el))
              if int(k) not in bonded_to_ligand]
    boxes, res_spotted = _spotted(_residue_label_boxes(labels, name, number), spotters, "residue", f"{name} {number}")
    prior = dict(zip(pocket, _label_excess(rec, pocket, boxes, ATOM_REACH_A.get(atom, REACH_DEFAULT_A)).tolist()))
    try:
        residues = identify_residues(rec, labels) if labels else []
    except Exception:  # residue names unknown: the labels' places alone
        residues = []
    for r in residues:
        if r.name == name and f"{r.number}{r.ins_code}" == number:
            for k in r.atoms:
                if k in prior:
                    prior[k] -= GROUP_BONUS_A + (NAME_BONUS_A if str(r.atom_names.get(k, "")).upper() == atom else 0.0)
    how = f"{how_lig}; named residue's label read in {len(boxes) - res_spotted} view(s), spotted in {res_spotted} more"
    return BondCandidates(lig_prior, ligand_named, prior, how, ligand_voted=named in lig_prior)


def pair_cost(rec: Reconstruction, cands: BondCandidates, k: int, j: int) -> float:
    """How unlikely ligand atom ``k`` and residue atom ``j`` are to be the named bond (Å): how far their distance is
    from the typical donor–acceptor distance (:data:`HBOND_IDEAL_A`) plus both atoms' label priors
    (:class:`BondCandidates`)."""
    d = float(np.linalg.norm(rec.coords[j] - rec.coords[k]))
    return abs(d - HBOND_IDEAL_A) + cands.residue.get(j, 0.0) + cands.ligand.get(k, 0.0)


def bond_pairs(rec: Reconstruction, cands: BondCandidates) -> tuple[list[tuple[int, int]], str]:
    """The (ligand atom, residue atom) pairs that may be the named H-bond.

    When the ligand atom is named (:class:`BondCandidates`) only its cheapest candidate is paired.
    A pair must be at H-bond distance (:data:`HBOND_SHELL_A`); its cost is :func:`pair_cost`.
    With one ligand candidate the cheapest pair is kept; with
    several, every pair within :data:`PAIR_TIE_A` of the cheapest (the options are then scored
    against all of them).
    """
    best_lig = min(cands.ligand.values(), default=0.0)
    ligs = {k: lp for k, lp in cands.ligand.items() if not cands.ligand_named or lp <= best_lig}
    pairs = []
    for k in ligs:
        for j in cands.residue:
            d = float(np.linalg.norm(rec.coords[j] - rec.coords[k]))
            if j != k and HBOND_SHELL_A[0] <= d <= HBOND_SHELL_A[1]:
                pairs.append((pair_cost(rec, cands, k, j), k, j))
    if pairs:
        pairs.sort()
        if cands.ligand_named:
            return [(pairs[0][1], pairs[0][2])], f"partner at H-bond distance (cost {pairs[0][0]:.2f})"
        keep = [(k, j) for c, k, j in pairs if c <= pairs[0][0] + PAIR_TIE_A]
        return keep, f"{len(keep)} candidate pairs at H-bond distance"
    allp = list(cands.residue)
    if not allp:
        return [(k, k) for k in ligs], "no partner atom: ligand atom alone"
    P = rec.coords[allp]
    prior = np.array([cands.residue[j] for j in allp])
    out = [(k, allp[int(np.argmin(np.linalg.norm(P - rec.coords[k], axis=1) + prior))]) for k in ligs]
    return out, "nearest pocket atom, its prior added (none at H-bond distance)"


RELABEL_A = 2.0  # Å: a ligand atom placed from its labels replaces the rebuilt one when this far from it
RELABEL_MIN_CHARS = 2  # names this short (``N``, ``O``) are read from fragments of longer labels too: not placed
RELABEL_MIN_SHARE = 0.5  # of the views where the name was read or spotted, this share must agree on its place


def _with_labelled_ligand_atom(rec: Reconstruction, labels: Mapping[str, Any], spots: Mapping[str, Any],
                               bond: Mapping[str, Any], cands: BondCandidates, pairs: list[tuple[int, int]], method: str
                               ) -> tuple[Reconstruction, BondCandidates, list[tuple[int, int]], str]:
    """The named ligand atom placed where its name labels meet (:mod:`misi_agent.tools.label_triangulation`) when
    identity's label votes name no rebuilt atom so, two or more views on different axes and half of those where the
    name was found agree on the place, and the rebuilt atom the pairs use lies more than :data:`RELABEL_A` from it:
    the reconstruction often misses the balls of a ligand buried under PyMOL's labels, and then pairs a neighbouring
    atom. Names of one character are not placed (fragments of longer labels read the same). The record gets the
    placed atom (appended, a ligand atom of the named element) and the pairs are redone with it alone. Unchanged
    otherwise. (Raster labels are moved out of each other's way, so they do not sit at one offset from their atoms:
    there identity names the atom, and the gate keeps the labels' point out.)

    Interaction location from the images: PyMOL 84 → 88 on the 50 test items, 66.7 → 86.7 on 30 items of the training
    split; raster 100 → 100 (``eval/results/label_spotting.md``)."""
    from misi_agent.tools.label_triangulation import label_offset, text_places, text_point, with_ligand_atoms

    want = str(bond.get("ligand_atom", "")).strip().upper()
    if len(want) < RELABEL_MIN_CHARS or not labels or cands.ligand_voted:
        return rec, cands, pairs, method
    offset, _ = label_offset(rec, labels)
    places = text_places(labels, spots, "ligand", want)
    placed = text_point(rec, places, offset, want)
    if placed is None or len(placed.views) < RELABEL_MIN_SHARE * len(places):
        return rec, cands, pairs, method
    coords = np.asarray(rec.coords, float)
    if pairs and min(float(np.linalg.norm(coords[k] - placed.coords)) for k, _ in pairs) <= RELABEL_A:
        return rec, cands, pairs, method
    k = len(coords)
    rec = with_ligand_atoms(rec, [placed])
    cands = replace(cands, ligand={k: 0.0}, ligand_named=True,
                    how=f"{cands.how}; placed where its labels meet in {len(placed.views)} views")
    new_pairs, new_method = bond_pairs(rec, cands)
    return rec, cands, new_pairs, new_method


UNSURE_PAIR_A = 3.0  # Å: a named bond's best pair costing more than this (length off the ideal plus the atoms' label
# priors) is taken for a guess, and the named residue is fitted at its label instead (see _named_atom_at_label)
AMBIGUOUS_LABEL_PX = 30.0  # px: a residue text found at two places this far apart in one view names two residues
# (a dimer's two chains number alike): its label point is not used


def pair_unsure(rec: Reconstruction, cands: BondCandidates, pairs: Sequence[tuple[int, int]], method: str) -> bool:
    """Whether the pairs :func:`bond_pairs` gave are a guess: none, a ligand atom alone, the nearest pocket atom (no
    partner at H-bond distance), or the cheapest pair costing more than :data:`UNSURE_PAIR_A`."""
    if not pairs or any(k == j for k, j in pairs) or method.startswith("nearest pocket atom"):
        return True
    return min(pair_cost(rec, cands, k, j) for k, j in pairs) > UNSURE_PAIR_A


def _named_atom_at_label(images_by_view: Mapping[str, Any], rec: Reconstruction, labels: Mapping[str, Any],
                         spots: Mapping[str, Any], bond: Mapping[str, Any], hidden: Mapping[str, Any] | None = None,
                         views: Sequence[Any] | None = None) -> tuple[np.ndarray, float] | None:
    """The named residue atom (Å, ``rec``'s frame) of the named residue fitted to the views with its CA held where its
    label's places meet, and the fit's cost (px); None where the labels are not drawn at the CAs (no consecutive
    residue labels give a ruler: the raster renderer moves them aside), the text is found at two places in a view
    (:data:`AMBIGUOUS_LABEL_PX`), its places do not meet in two views, or the fit is poor
    (:data:`~misi_agent.tools.image_hbonds.LABEL_FIT_PX`, the T9 pipeline's gate for label-held fits).

    Why: in PyMOL's piles the reconstruction often holds neither of the named atoms, and the pair the label priors
    choose then lies far from the bond (1n7g: 16 Å). The label point holds the CA to about 0.1 Å and a residue fitted
    from it places its atoms within 0.2-0.5 Å on most PyMOL T8 items, as :func:`~misi_agent.tools.image_hbonds.
    pocket_hbonds_from_images` fits residues from their labels. ``hidden``: ``labels`` with the residue labels spotted
    in the piles (:func:`~misi_agent.tools.label_spotting.with_hidden_residue_labels`) and ``views`` the loaded views
    (:func:`~misi_agent.tools.reconstruction.load_views`) where the caller has them; made here otherwise."""
    from misi_agent.tools.image_hbonds import LABEL_FIT_PX, _fitted_either_carbon
    from misi_agent.tools.label_spotting import with_hidden_residue_labels
    from misi_agent.tools.label_triangulation import residue_label_distance, text_places, text_point
    from misi_agent.tools.residue_fit import Restraint

    name = str(bond.get("residue_name", "")).strip().upper()
    atom = str(bond.get("residue_atom", "")).strip().upper()
    text = f"{name} {str(bond.get('residue_number', '')).strip()}"
    if hidden is None:
        hidden = with_hidden_residue_labels(images_by_view, labels, sp=spots)
    if residue_label_distance(rec, hidden)[0] is None:
        return None
    places = text_places(labels, spots, "residue", text)
    if any(len(ps) > 1 and max(float(np.hypot(*(np.asarray(a) - np.asarray(b)))) for a in ps for b in ps)
           > AMBIGUOUS_LABEL_PX for ps in places.values()):
        return None
    point = text_point(rec, places, np.zeros(2), text)
    if point is None:
        return None
    ca = np.asarray(point.coords, float)
    views = views if views is not None else load_views(images_by_view)
    fit = _fitted_either_carbon(views, name, float(rec.distance), at=("CA", ca), restraints=[Restraint("CA", ca)])
    if fit is None or fit.cost_px > LABEL_FIT_PX or atom not in fit.coords:
        return None
    return np.asarray(fit.coords[atom], float), float(fit.cost_px)


def _ligand_partner(rec: Reconstruction, cands: BondCandidates, x: np.ndarray) -> int | None:
    """The ligand candidate at H-bond distance of ``x`` whose length is nearest the ideal, its prior added."""
    best = None
    for k, prior in cands.ligand.items():
        d = float(np.linalg.norm(rec.coords[k] - x))
        cost = abs(d - HBOND_IDEAL_A) + prior
        if HBOND_SHELL_A[0] <= d <= HBOND_SHELL_A[1] and (best is None or cost < best[0]):
            best = (cost, k)
    return None if best is None else best[1]


def bond_ends(images_by_view: Mapping[str, Any], rec: Reconstruction, labels: Mapping[str, Any],
              spots: Mapping[str, Any], bond: Mapping[str, Any], cands: BondCandidates,
              pairs: list[tuple[int, int]], method: str, hidden: Mapping[str, Any] | None = None,
              views: Sequence[Any] | None = None
              ) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[tuple[int, int]], str, list[float] | None]:
    """The two ends (Å) of each candidate bond whose midpoint the options are measured against, the pairs (index -1:
    a point not in the reconstruction), how they were chosen, and the named residue atom fitted at its label where
    that stood in. The pairs' atoms, unless they are a guess (:func:`pair_unsure`) and the named residue can be
    fitted at its label (:func:`_named_atom_at_label`): then its named atom and the ligand candidate at H-bond
    distance of it (:func:`_ligand_partner`), or that atom alone.

    Measured in fresh runs (``eval/results/image_heldout.md``): PyMOL T8 on 50 test items 88 -> 90 (6xct), on 30
    training items 86.7 -> 90 (7rou), on the held-out PLIP pool's 20 items 65 -> 70 (6nhb), no answer lost; raster
    unchanged (100 on the 50 test items: its labels stand beside their atoms, so no label point is taken). ``hidden``
    and ``views``: as for :func:`_named_atom_at_label`, passed on."""
    ends = [(rec.coords[k], rec.coords[j]) for k, j in pairs]
    if not (labels and spots and pair_unsure(rec, cands, pairs, method)):
        return ends, pairs, method, None
    found = _named_atom_at_label(images_by_view, rec, labels, spots, bond, hidden, views)
    if found is None:
        return ends, pairs, method, None
    x, cost = found
    k = _ligand_partner(rec, cands, x)
    method = (f"{method}; a guess: the named residue fitted with its CA at its label ({cost:.2f} px) instead, "
              f"{'its atom alone' if k is None else 'with the ligand candidate at H-bond distance'}")
    return ([(x if k is None else rec.coords[k], x)], [(-1 if k is None else k, -1)], method,
            [round(float(v), 3) for v in x])


def locate_interaction(images: Sequence[Any], bond: Mapping[str, Any], options: Mapping[str, str],
                       rec: Reconstruction | None = None) -> SpatialAnswer:
    """T8 from the pictures: the option that brings the named bond's midpoint onto the line of sight.

    The bond's candidate atoms come from the labels (:func:`bond_candidates`) and H-bond
    geometry (:func:`bond_pairs`); each option's cost is its distance (Å) to the move that
    centres the midpoint of the closest candidate pair (one pair when the atoms are known).
    Where no ligand balls give the reconstruction's Å scale (PyMOL's labels cover the ligand, most of all in small
    pictures), the consecutive residue labels give it (:func:`~misi_agent.tools.label_triangulation.
    rescaled_by_residue_labels`, over the labels read plus those spotted in the piles): PyMOL at 384 px, 10 items,
    10 → 30; at 512 px (50 items) the three items so rescaled keep their answers (88); raster unchanged
    (``eval/results/image_sizes.md``). Where the pair is a guess, the named residue fitted at its label stands in for
    it (:func:`bond_ends`; PyMOL 88 → 90 on the 50 test items, 65 → 70 held out, ``eval/results/image_heldout.md``).
    """
    images = G._check_images(images, T.INTERACTION_LOCATION)
    letters = [L for L in T.CHOICE_LETTERS if L in options]
    if len(letters) != len(T.CHOICE_LETTERS):
        raise G.SpatialTaskError("interaction location needs the four options A-D")
    views = views_of(images, T.VIEWS6)
    own_rec = rec is None  # a reconstruction passed in keeps its scale (an oracle's is exact)
    loaded = None if rec is not None else load_views(views)  # the views' analyses, made once for the reconstruction
    rec = rec if rec is not None else reconstruct(views, views=loaded)  # and the residue fits
    an0 = image_analysis(images[0], cloud_points(rec).names)
    cam = ViewCamera(an0.width, an0.height)
    try:
        from misi_agent.tools.image_hbonds import read_all_labels

        labels = read_all_labels(views)
    except Exception as exc:  # no label reader, or it failed: names unknown, geometry only
        labels = {}
        reader_note = f"labels not read ({type(exc).__name__})"
    else:
        reader_note = ""
    from misi_agent.tools.label_spotting import spotters as make_spotters, with_hidden_residue_labels
    from misi_agent.tools.label_triangulation import rescaled_by_residue_labels

    spots = make_spotters(views, labels) if labels else {}
    hidden = None  # the labels plus the residue labels spotted in PyMOL's piles, made once where the scale needs them
    if own_rec and labels and not rec.scale_source.startswith(BALL_SCALE_SOURCE):
        hidden = with_hidden_residue_labels(views, labels, sp=spots)
        rec = rescaled_by_residue_labels(views, loaded, rec, hidden)
    reg = _record(an0, cloud_points(rec), cam, rec)  # at the scale the answer uses
    cands = bond_candidates(rec, labels, bond, spots)
    pairs, method = bond_pairs(rec, cands)
    rec, cands, pairs, method = _with_labelled_ligand_atom(rec, labels, spots, bond, cands, pairs, method)
    ends, pairs, method, at_label = bond_ends(views, rec, labels, spots, bond, cands, pairs, method, hidden, loaded)
    if not ends:
        raise G.SpatialTaskError("interaction location: no ligand atom was reconstructed from the pictures")
    moves_ = np.array([G._net_xy(options[L]) for L in letters], float)
    mids = np.array([(a + b) / 2.0 for a, b in ends])[:, :2]
    needs = -mids  # the move that puts each candidate midpoint on the line of sight
    D = np.linalg.norm(moves_[:, None, :] - needs[None, :, :], axis=2)  # options x pairs
    dist = D.min(axis=1)
    p = int(np.argmin(D.min(axis=0)))
    need = needs[p]
    ranking = rank(letters, dist)
    sure = cands.ligand_named and len(pairs) == 1 and at_label is None
    notes = [] if sure else [f"the bond's atoms are not both known ({cands.how}; {method}): answer unsure"]
    if reader_note:
        notes.append(reader_note)
    fit = {"matched": reg.matched, "explained": reg.explained, "chamfer": reg.chamfer_px, "ok": reg.ok and sure}
    details = {"needed_move": f"move x {need[0]:.2f}, move y {need[1]:.2f}", "ligand_atom_found_by": cands.how,
               "option_chosen_by": method, "bond_atoms": [int(pairs[p][0]), int(pairs[p][1])],  # -1: not rebuilt
               **({"residue_atom_fitted_at_label": at_label} if at_label is not None else {}),
               "option_moves": {L: list(m) for L, m in zip(letters, moves_.tolist())}, **_details(rec)}
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
