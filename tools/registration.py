"""Register a structure to an image: the camera that maps the scene's atoms onto what the image shows.

The structure is known (the entry the question names, as a :class:`~misi_agent.scene.Scene`
in the view the image is said to show); the image is only pixels. Registration estimates
the camera from the pixels, never from a renderer's settings, assuming only the
benchmark's conventions: a pinhole camera looking down −z with a 30° horizontal field of
view (the prior), the image centre on the optical axis, the scene in the named canonical
view. What is unknown is where the scene sits in front of that camera: a shift
``(tx, ty, tz)`` in Å added to the view coordinates (``tz`` sets the apparent scale, ``tx``,
``ty`` the position), which is 0 when the image follows the benchmark's framing exactly.

Matching is between *point sets per colour class*: the scene gives every atom and points
along every half-bond (a half-bond is drawn in its atom's colour), the image gives the
centre lines of every colour class (:func:`misi_agent.tools.atom_detection.analyse_image`).
Two directions are scored, each truncated at τ pixels so that occluded atoms and
unexplained pixels cost a bounded amount:

* forward: every predicted point in the image → the nearest centre-line pixel of its class;
* backward: every centre-line pixel (sampled) → the nearest predicted point of its class.

The symmetric truncated chamfer cost (mean of both, px) is the score every spatial tool
uses; registration minimises it over the shift by ICP (Gauss–Newton on the shift with
nearest-neighbour correspondences in both directions, τ shrinking from coarse to fine),
starting from the benchmark's framing and, if that fits badly (or when the framing is
unknown, :func:`register_free_shift`), from the image's moments with wide first cut-offs and
then from other starting depths. A registration is trusted (``ok``) when most of the image's
class centre lines are explained and a fair share of the atoms matched (:data:`OK_EXPLAINED`,
:data:`OK_MATCHED`): another entry's structure, or another ligand's pocket, fails that.
"""
from __future__ import annotations

import math
import os
from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from scipy.spatial import cKDTree

from misi_agent.camera import FOV_DEG, NEAR, compose_rigid
from misi_agent.scene import Scene
from misi_agent.tools.atom_detection import (
    CLASS_IDS,
    CLASS_SEPARATION,
    DEFAULT_CLASSES,
    ImageAnalysis,
    analyse_image,
    as_rgb,
    find_balls,
    stack_classes,
    stacked_tree,
)
from misi_agent.tools.spatial_records import Correspondence, Registration

HALF_BOND_SAMPLES = (0.2, 0.4)  # fractions along a bond from each atom where points of its colour are placed
TAU_PX = 10.0  # truncation of the chamfer terms at 512 px (scaled with the image width)
ICP_TAUS = (24.0, 12.0, 6.0, 4.0)  # correspondence cut-offs (px at 512) for the coarse-to-fine ICP
FREE_ICP_TAUS = (64.0, 32.0, 16.0, 8.0, 4.0)  # wider first cut-offs when the framing is unknown
ICP_STEPS = 6  # Gauss–Newton steps per cut-off
MAX_BACKWARD = 2500  # centre-line samples per image for the backward term
MATCH_TOL_PX = 3.0  # px at 512: an atom is matched when a pixel of its class lies this close
EXPLAIN_WIDTHS = 2.0  # a centre-line pixel is explained by a predicted point within this many half-widths (or the tolerance)
OK_MATCHED = 0.25  # registration is trusted when at least this share of atoms is matched ...
OK_EXPLAINED = 0.85  # ... and at least this share of the class centre lines is explained
# (initial views of the right structure: 0.4-0.8 matched, 0.95-1.0 explained; another entry's or another
# ligand copy's pocket: about 0.1 and 0.2; another ligand whose pocket overlaps this one: 0.5 and 0.7)
EXTRA_CLASSES = ("BR", "I")  # analysed only when the scene holds them (Br is close to O in colour)


# ----------------------------------------------------------------------------- scene points


@dataclass(frozen=True)
class ScenePoints:
    """What a scene should show, as points: every atom plus samples along every half-bond.

    ``points`` are view coordinates (Å); ``cls`` indexes ``names`` (colour classes);
    ``atom`` is the scene atom index of atom points and −1 for bond samples; ``owner`` the
    atom whose half-bond (and colour) a point belongs to (the atom itself for atom points);
    ``center`` is the centroid of the atoms (the centre of rotation of the command language).
    """

    points: np.ndarray
    cls: np.ndarray
    names: tuple[str, ...]
    atom: np.ndarray
    center: np.ndarray
    owner: np.ndarray

    @property
    def class_key(self) -> np.ndarray:
        """Per point: its class id × CLASS_SEPARATION (the third coordinate of the stacked k-d trees)."""
        ids = np.array([CLASS_IDS[n] * CLASS_SEPARATION for n in self.names], float)
        return ids[self.cls]

    def moved(self, commands) -> "ScenePoints":
        """The same points after commands (rolls about the atoms' centroid, which moves with them)."""
        if not commands:
            return self
        R, t = compose_rigid(commands, self.center)
        return replace(self, points=self.points @ R.T + t, center=R @ self.center + t)

    def transformed(self, R: np.ndarray, t: np.ndarray) -> "ScenePoints":
        return replace(self, points=self.points @ R.T + t, center=R @ self.center + t)

    def subset(self, mask: np.ndarray) -> "ScenePoints":
        mask = np.asarray(mask, bool)
        return replace(self, points=self.points[mask], cls=self.cls[mask], atom=self.atom[mask],
                       owner=self.owner[mask])

    @property
    def is_atom(self) -> np.ndarray:
        return self.atom >= 0


def scene_points(scene: Scene, samples: Sequence[float] = HALF_BOND_SAMPLES) -> ScenePoints:
    """Atoms and half-bond samples of ``scene`` with their colour classes."""
    classes = scene.color_classes()
    names = tuple(dict.fromkeys(classes))
    cidx = np.array([names.index(c) for c in classes], int)
    coords = np.asarray(scene.coords, float)
    idx = np.arange(len(coords))
    pts, cls, atom, owner = [coords], [cidx], [idx], [idx]
    bonds = np.asarray(scene.bonds, int).reshape(-1, 2)
    if len(bonds):
        a, b = bonds[:, 0], bonds[:, 1]
        for t in samples:
            pts += [(1 - t) * coords[a] + t * coords[b], t * coords[a] + (1 - t) * coords[b]]
            cls += [cidx[a], cidx[b]]
            atom += [np.full(len(a), -1), np.full(len(b), -1)]
            owner += [a, b]
    return ScenePoints(np.concatenate(pts), np.concatenate(cls), names, np.concatenate(atom),
                       coords.mean(axis=0) if len(coords) else np.zeros(3), np.concatenate(owner))


# ----------------------------------------------------------------------------- camera


@dataclass(frozen=True)
class ViewCamera:
    """The benchmark's pinhole camera with the scene shifted by ``shift`` Å (camera = view + shift)."""

    width: int
    height: int
    fov_deg: float = FOV_DEG
    shift: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def focal(self) -> float:
        return (self.width / 2.0) / math.tan(math.radians(self.fov_deg) / 2.0)

    def with_shift(self, shift) -> "ViewCamera":
        return replace(self, shift=tuple(float(v) for v in shift))

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pixel positions (x right, y down) and depths of view-coordinate points."""
        p = np.asarray(points, float) + np.asarray(self.shift, float)
        depth = -p[:, 2]
        safe = np.where(depth > 1e-6, depth, np.nan)
        f = self.focal
        uv = np.stack([self.width / 2.0 + f * p[:, 0] / safe, self.height / 2.0 - f * p[:, 1] / safe], axis=1)
        return uv, depth

    def in_view(self, uv: np.ndarray, depth: np.ndarray, margin: float = 0.0) -> np.ndarray:
        ok = (depth > NEAR) & np.isfinite(uv).all(axis=1)
        u, v = np.nan_to_num(uv[:, 0]), np.nan_to_num(uv[:, 1])
        return ok & (u >= -margin) & (u < self.width + margin) & (v >= -margin) & (v < self.height + margin)


# ----------------------------------------------------------------------------- images


_ANALYSES: "OrderedDict[tuple, ImageAnalysis]" = OrderedDict()
ANALYSIS_CACHE = 32  # analyses of image files kept (a solver and its ligand-choice checks share them)


def image_analysis(image: Any, classes: Sequence[str] = ()) -> ImageAnalysis:
    """The colour-class analysis of an image for matching a scene with ``classes`` (plus the usual ones).

    Analyses of image *files* are cached (by path, size and modification time), so the same
    picture is analysed once however many hypotheses are matched against it.
    """
    if isinstance(image, (ImageAnalysis, PixelEvidence)):
        return image
    extra = tuple(c for c in EXTRA_CLASSES if c in classes)
    names = DEFAULT_CLASSES + extra
    key = None
    if isinstance(image, (str, Path)):
        try:
            st = os.stat(image)
            key = (str(Path(image).resolve()), st.st_size, st.st_mtime_ns, names)
        except OSError:
            key = None
        if key is not None and key in _ANALYSES:
            _ANALYSES.move_to_end(key)
            return _ANALYSES[key]
    an = analyse_image(as_rgb(image), names)
    if key is not None:
        _ANALYSES[key] = an
        while len(_ANALYSES) > ANALYSIS_CACHE:
            _ANALYSES.popitem(last=False)
    return an


@dataclass(frozen=True)
class PixelEvidence:
    """A subset of an image's class centre lines, usable wherever an :class:`ImageAnalysis` is matched."""

    width: int
    height: int
    ridge: dict[str, np.ndarray]

    @cached_property
    def trees(self) -> dict[str, cKDTree]:
        return {n: cKDTree(p) for n, p in self.ridge.items() if len(p)}

    @cached_property
    def tree3(self) -> cKDTree | None:
        return stacked_tree(self.ridge)


def unexplained(an: ImageAnalysis, sp: ScenePoints, camera: ViewCamera, tol_px: float = 4.0) -> PixelEvidence:
    """The centre-line pixels of ``an`` that no point of ``sp`` (same class, within ``tol_px`` at 512) explains.

    Used to isolate one part of an image (the displaced ligand) once another part (the pocket)
    is registered.
    """
    tol = tol_px * _scale(an)
    uv, depth = camera.project(sp.points)
    ok = (depth > NEAR) & np.isfinite(uv).all(axis=1)
    rest = {}
    for n, pts in an.ridge.items():
        if len(pts) and n in sp.names:
            sel = ok & (sp.cls == sp.names.index(n))
            if sel.any():
                d, _ = cKDTree(uv[sel]).query(pts, distance_upper_bound=tol)
                pts = pts[~np.isfinite(d)]
        rest[n] = pts
    return PixelEvidence(an.width, an.height, rest)


def _scale(an: ImageAnalysis) -> float:
    return an.width / 512.0


class Samples(dict):
    """Centre-line samples per class (a dict) that also keeps them stacked for one k-d tree query."""

    @cached_property
    def stacked(self) -> np.ndarray:
        return stack_classes(self)


def backward_samples(an: ImageAnalysis, names: Sequence[str], cap: int = MAX_BACKWARD) -> Samples:
    """Centre-line points of the classes in ``names``, thinned evenly to at most ``cap`` in total."""
    pts = {n: an.ridge[n] for n in names if n in an.ridge and len(an.ridge[n])}
    total = sum(len(p) for p in pts.values())
    if total > cap:
        step = int(math.ceil(total / cap))
        pts = {n: p[::step] for n, p in pts.items()}
    return Samples(pts)


@dataclass
class MatchCost:
    """One evaluation of predicted points against an image (all distances in px)."""

    cost: float  # symmetric truncated chamfer: mean of forward and backward means
    forward: float
    backward: float
    n_forward: int
    n_backward: int


def match_cost(an: ImageAnalysis, sp: ScenePoints, camera: ViewCamera, tau: float | None = None,
               backward: bool = True, samples: Samples | None = None, atoms_only: bool = False) -> MatchCost:
    """Symmetric truncated chamfer cost of ``sp`` seen through ``camera`` against the image.

    Forward: predicted points inside the image → nearest centre-line pixel of their class.
    Backward: centre-line pixels of the scene's classes → nearest predicted point of their
    class (points just outside the image count, so cropped atoms still explain pixels at the
    border). Each distance is capped at ``tau`` (default :data:`TAU_PX` scaled to the image).
    With no predicted point in the image the cost is ``tau``. All classes are matched in one
    k-d tree query per direction: the class id is a far-apart third coordinate.
    """
    tau = TAU_PX * _scale(an) if tau is None else tau
    uv, depth = camera.project(sp.points)
    front = (depth > NEAR) & ~np.isnan(uv[:, 0])
    u, v = uv[:, 0], uv[:, 1]
    inside = front & (u >= 0) & (u < camera.width) & (v >= 0) & (v < camera.height)
    if atoms_only:
        inside = inside & sp.is_atom
    key = sp.class_key
    n_f = int(np.count_nonzero(inside))
    f_sum = 0.0
    if n_f:
        tree = an.tree3
        if tree is None:
            f_sum = tau * n_f
        else:
            q = np.column_stack([uv[inside], key[inside]])
            d, _ = tree.query(q, distance_upper_bound=tau)
            f_sum = float(np.minimum(d, tau).sum())
    b_sum, n_b = 0.0, 0
    if backward:
        samples = samples if samples is not None else backward_samples(an, sp.names)
        pts = samples.stacked
        n_b = len(pts)
        if n_b:
            near = front & (u >= -tau) & (u < camera.width + tau) & (v >= -tau) & (v < camera.height + tau)
            if np.any(near):
                d, _ = cKDTree(np.column_stack([uv[near], key[near]])).query(pts, distance_upper_bound=tau)
                b_sum = float(np.minimum(d, tau).sum())
            else:
                b_sum = tau * n_b
    fwd = f_sum / n_f if n_f else tau
    bwd = b_sum / n_b if n_b else (tau if backward else 0.0)
    cost = 0.5 * (fwd + bwd) if backward else fwd
    return MatchCost(float(cost), float(fwd), float(bwd), n_f, n_b)


# ----------------------------------------------------------------------------- ICP


def _jacobian(p: np.ndarray, f: float) -> np.ndarray:
    """d(u, v)/d(tx, ty, tz) for camera-frame points p (K, 3): (K, 2, 3)."""
    d = -p[:, 2]
    J = np.zeros((len(p), 2, 3))
    J[:, 0, 0] = f / d
    J[:, 0, 2] = f * p[:, 0] / d ** 2
    J[:, 1, 1] = -f / d
    J[:, 1, 2] = -f * p[:, 1] / d ** 2
    return J


def refine_shift(an: ImageAnalysis, sp: ScenePoints, camera: ViewCamera, taus: Sequence[float] = ICP_TAUS,
                 steps: int = ICP_STEPS) -> ViewCamera:
    """ICP on the camera shift: correspondences in both directions, Gauss–Newton, τ coarse to fine."""
    scale = _scale(an)
    samples = backward_samples(an, sp.names, cap=1500)
    trees = an.trees
    shift = np.asarray(camera.shift, float)
    f = camera.focal
    for tau in taus:
        tau = tau * scale
        for _ in range(steps):
            cam = camera.with_shift(shift)
            uv, depth = cam.project(sp.points)
            inside = cam.in_view(uv, depth)
            rows_J, rows_r = [], []
            pcam = sp.points + shift
            for k, name in enumerate(sp.names):
                sel = np.flatnonzero(inside & (sp.cls == k))
                tree = trees.get(name)
                if len(sel) and tree is not None:
                    d, j = tree.query(uv[sel], distance_upper_bound=tau)
                    ok = np.isfinite(d)
                    if ok.any():
                        q = tree.data[j[ok]]
                        rows_J.append(_jacobian(pcam[sel[ok]], f))
                        rows_r.append(uv[sel[ok]] - q)
                pts = samples.get(name)
                if pts is not None and len(sel):
                    d, j = cKDTree(uv[sel]).query(pts, distance_upper_bound=tau)
                    ok = np.isfinite(d)
                    if ok.any():
                        src = sel[j[ok]]
                        rows_J.append(_jacobian(pcam[src], f))
                        rows_r.append(uv[src] - pts[ok])
            if not rows_J:
                break
            J = np.concatenate(rows_J).reshape(-1, 3)
            r = np.concatenate(rows_r).reshape(-1)
            # robust (Huber) weights on the 2D residual length
            n = len(r) // 2
            res = np.hypot(r[0::2], r[1::2])
            h = max(1.0, 0.5 * tau)
            w = np.where(res <= h, 1.0, h / np.maximum(res, 1e-9))
            W = np.repeat(w, 2)
            A = J.T @ (J * W[:, None])
            b = J.T @ (W * r)
            try:
                delta = -np.linalg.solve(A + 1e-6 * np.eye(A.shape[0]), b)
            except np.linalg.LinAlgError:
                break
            # keep the scene in front of the camera
            if np.any(-(pcam[:, 2] + delta[2]) <= NEAR) and delta[2] > 0:
                delta[2] = 0.0
            shift = shift + delta
            if np.linalg.norm(delta) < 1e-3 and n:
                break
    return camera.with_shift(shift)


def moment_shift(an: ImageAnalysis, sp: ScenePoints, camera: ViewCamera,
                 classes: Sequence[str] | None = None) -> np.ndarray:
    """A starting shift that matches the centroid and spread of the class pixels with the prediction's.

    ``classes`` limits both to some colour classes: e.g. the pocket's carbons, which nothing
    else in a picture of pocket and ligand is drawn in.
    """
    use = [n for n in sp.names if classes is None or n in classes]
    pix = np.concatenate([p for n, p in an.ridge.items() if n in use and len(p)] or [np.zeros((0, 2))])
    uv, depth = camera.project(sp.points)
    ok = (depth > NEAR) & np.isfinite(uv).all(axis=1) & np.isin(sp.cls, [sp.names.index(n) for n in use])
    if len(pix) < 10 or ok.sum() < 10:
        return np.asarray(camera.shift, float)
    spread_img = np.sqrt(((pix - pix.mean(0)) ** 2).sum(1).mean())
    spread_pred = np.sqrt(((uv[ok] - uv[ok].mean(0)) ** 2).sum(1).mean())
    zc = -(sp.points[:, 2].mean() + camera.shift[2])  # centroid depth
    ratio = spread_pred / max(spread_img, 1e-6)
    tz = camera.shift[2] + zc - zc * ratio  # new depth = old depth × ratio
    depth_new = zc * ratio
    f = camera.focal
    cu, cv = pix.mean(0)
    c = sp.points.mean(0)
    tx = (cu - camera.width / 2.0) * depth_new / f - c[0]
    ty = -(cv - camera.height / 2.0) * depth_new / f - c[1]
    return np.array([tx, ty, tz])


DEPTH_FACTORS = (1.0, 0.85, 1.18, 0.72, 1.4, 1.7)  # starting depths (× the moments' estimate) tried in turn


def _centred_start(an: ImageAnalysis, sp: ScenePoints, camera: ViewCamera, use: Sequence[str], depth: float
                   ) -> np.ndarray:
    """The shift that puts the points' centroid at ``depth`` on the line of sight through the pixels' centroid."""
    pix = np.concatenate([p for n, p in an.ridge.items() if n in use and len(p)] or [np.zeros((0, 2))])
    sel = np.isin(sp.cls, [sp.names.index(n) for n in use])
    c = sp.points[sel].mean(axis=0) if sel.any() else sp.center
    cu, cv = pix.mean(axis=0) if len(pix) else (camera.width / 2.0, camera.height / 2.0)
    f = camera.focal
    return np.array([(cu - camera.width / 2.0) * depth / f - c[0], -(cv - camera.height / 2.0) * depth / f - c[1],
                     -c[2] - depth])


def register_free_shift(an: ImageAnalysis, sp: ScenePoints, camera: ViewCamera,
                        classes: Sequence[str] | None = None) -> ViewCamera:
    """Fit the shift when the framing is unknown: ICP with wide first cut-offs (:data:`FREE_ICP_TAUS`)
    from the moments' estimate, then, while the fit is poor, from other starting depths
    (:data:`DEPTH_FACTORS`); the lowest chamfer cost wins.

    ``classes`` limits the moments to colour classes only these points are drawn in.
    """
    use = [n for n in sp.names if classes is None or n in classes]
    m = moment_shift(an, sp, camera, classes)
    sel = np.isin(sp.cls, [sp.names.index(n) for n in use])
    c = sp.points[sel].mean(axis=0) if sel.any() else sp.center
    depth0 = -(c[2] + m[2])
    best, best_cost = None, np.inf
    for k, factor in enumerate(DEPTH_FACTORS):
        start = m if k == 0 else _centred_start(an, sp, camera, use, depth0 * factor)
        cam = refine_shift(an, sp, camera.with_shift(start), taus=FREE_ICP_TAUS)
        q = fit_quality(an, sp, cam)
        if q["chamfer"] < best_cost:
            best, best_cost = cam, q["chamfer"]
        if q["matched"] >= OK_MATCHED and q["explained"] >= OK_EXPLAINED:
            break
    return best


# ----------------------------------------------------------------------------- registration


def fit_quality(an: ImageAnalysis, sp: ScenePoints, camera: ViewCamera) -> dict[str, float]:
    """Residual (median atom→class distance), matched share, explained share and chamfer cost."""
    scale = _scale(an)
    tol = MATCH_TOL_PX * scale
    cap = 50.0 * scale
    uv, depth = camera.project(sp.points)
    inside = camera.in_view(uv, depth)
    atom_d = []
    for k, name in enumerate(sp.names):
        sel = inside & sp.is_atom & (sp.cls == k)
        if not np.any(sel):
            continue
        tree = an.trees.get(name)
        if tree is None:
            atom_d.append(np.full(int(sel.sum()), cap))
        else:
            d, _ = tree.query(uv[sel], distance_upper_bound=cap)
            atom_d.append(np.minimum(d, cap))
    atom_d = np.concatenate(atom_d) if atom_d else np.zeros(0)
    samples = backward_samples(an, sp.names)
    expl_n, expl_ok = 0, 0
    front = (depth > NEAR) & np.isfinite(uv).all(axis=1)
    total = sum(len(an.ridge[n]) for n in samples)
    step = max(1, int(math.ceil(total / MAX_BACKWARD)))
    for name in samples:
        pts, width = an.ridge[name][::step], an.ridge_width[name][::step]
        # a centre-line pixel of a thick (near) stick is explained by a bond point within its width
        tol_i = np.maximum(tol, EXPLAIN_WIDTHS * width)
        k = sp.names.index(name)
        sel = front & (sp.cls == k)
        expl_n += len(pts)
        if np.any(sel):
            d, _ = cKDTree(uv[sel]).query(pts, distance_upper_bound=float(tol_i.max()))
            expl_ok += int(np.count_nonzero(d <= tol_i))
    mc = match_cost(an, sp, camera, samples=samples)
    return {"residual": float(np.median(atom_d)) if atom_d.size else float("inf"),
            "matched": float(np.mean(atom_d <= tol)) if atom_d.size else 0.0,
            "explained": expl_ok / expl_n if expl_n else 0.0,
            "chamfer": mc.cost, "n_in_image": int(atom_d.size), "tol": tol}


def ligand_correspondences(an: ImageAnalysis, scene: Scene, camera: ViewCamera) -> tuple[Correspondence, ...]:
    """Detected balls matched to the scene's ligand atoms of the same colour class (nearest within 0.6 radii)."""
    balls = find_balls(an)
    if not balls:
        return ()
    lig = np.flatnonzero(scene.is_ligand)
    if not len(lig):
        return ()
    uv, depth = camera.project(scene.coords[lig])
    classes = scene.color_classes()
    want = {"O": "O", "N": "N", "LIGAND_C": "LIGAND_C"}
    out, used = [], set()
    for j, b in enumerate(balls):
        d = np.hypot(uv[:, 0] - b.x, uv[:, 1] - b.y)
        d = np.where(depth > NEAR, d, np.inf)
        for i in np.argsort(d, kind="stable"):
            if not np.isfinite(d[i]) or d[i] > max(MATCH_TOL_PX * _scale(an), 0.6 * b.radius):
                break
            a = int(lig[i])
            if a in used or want.get(classes[a], "OTHER") != b.color_class:
                continue
            used.add(a)
            out.append(Correspondence(a, str(scene.atom_names[a]), j, float(d[i])))
            break
    return tuple(out)


def register(scene: Scene, image: Any, fov_deg: float = FOV_DEG, points: ScenePoints | None = None,
             correspondences: bool = True, search: bool = True) -> tuple[Registration, ViewCamera]:
    """Fit the camera that shows ``scene`` as ``image`` shows it; returns the record and the camera.

    ``scene`` is the structure in the view the image is said to show (e.g.
    ``scene_from_complex(cx, "front")``); ``image`` a path, PIL image, array or an
    :class:`ImageAnalysis`. The camera is the benchmark's (``fov_deg`` horizontal, image
    centre on the axis) with a fitted shift of the scene; ``ok`` is False when the fit is poor
    (the structure does not match the image). With ``search=False`` a poor fit from the
    benchmark's framing is reported as it is, without searching for another framing (a cheap
    first test of several candidate structures; a fit that is ``ok`` is the same either way).
    """
    sp = points if points is not None else scene_points(scene)
    an = image_analysis(image, sp.names)
    cam0 = ViewCamera(an.width, an.height, fov_deg)
    tries = [refine_shift(an, sp, cam0)]
    q = fit_quality(an, sp, tries[0])
    notes = []
    if search and (q["matched"] < OK_MATCHED or q["explained"] < OK_EXPLAINED):
        alt = register_free_shift(an, sp, cam0)
        qa = fit_quality(an, sp, alt)
        if qa["chamfer"] < q["chamfer"]:
            tries.append(alt)
            q = qa
            notes.append("the benchmark framing did not fit; the camera was searched for from the image's moments")
    cam = tries[-1] if len(tries) > 1 and q is not None and notes else tries[0]
    ok = q["matched"] >= OK_MATCHED and q["explained"] >= OK_EXPLAINED
    if not ok:
        notes.append(f"poor fit: {q['matched']:.0%} of atoms matched, {q['explained']:.0%} of the class pixels "
                     "explained; the structure may not be what the image shows")
    if abs(cam.shift[2]) > 0.1 * max(1.0, -float(np.mean(sp.points[:, 2]))):
        notes.append(f"the image's framing differs from the benchmark's (depth shift {cam.shift[2]:+.1f} Å)")
    corr = ligand_correspondences(an, scene, cam) if correspondences else ()
    rec = Registration(an.width, an.height, fov_deg, tuple(float(v) for v in cam.shift), q["residual"], q["chamfer"],
                       q["matched"], q["explained"], q["tol"], bool(ok), q["n_in_image"], corr, tuple(notes))
    return rec, cam
