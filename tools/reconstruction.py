"""Reconstruct the pictured complex in 3D from its canonical views alone (no structure file).

What the pictures fix (docs/conventions.md): every view is the front scene rolled about the
centroid of the displayed atoms, which sits on the line of sight at one distance ``D`` in
all views, seen by a pinhole camera with a 30° horizontal field of view. So the cameras of
all views are known up to that one distance, and because a scene scaled by λ about the
camera and seen from λ·D looks the same, the geometry is first solved in *normalised*
units (``D = 1``) and the Å scale comes last, from what has a known size in Å: the apparent
radius of the ligand's balls (:func:`ball_radius_distance`, about ±3 % on 20 raster test
complexes), else the ligand's bond lengths (:func:`estimate_distance`), else a default.

Method, for every view in turn as the *source* (plane sweep along each pixel's ray):

1. every view's pixels are classified into colour classes and their centre lines found
   (:func:`misi_agent.tools.atom_detection.analyse_image`); per view and class a distance
   map to the nearest pixel of that class is computed once;
2. every centre-line pixel of the source view is a ray; depths along it are swept and each
   3D candidate is projected into the other views, where it costs its distance (px) to the
   nearest pixel of its own class, or a fixed :data:`OCCLUDED_PX` if it lands on another
   foreground pixel (hidden behind something or under a label) — this is the
   correspondence problem solved jointly through the shared coordinates of the views
   (front and left share y, front and top share x) and the colour classes;
3. the depth with the lowest cost wins when it is clearly better than any other depth
   (else the pixel is ambiguous and dropped) and at least one other view sees it directly;
4. points from all sources are fused on a grid; each fused point is re-projected into
   every view and kept when its class is seen there (or plausibly hidden).

Ligand atoms are balls (:func:`misi_agent.tools.atom_detection.find_balls`): each ball is
swept the same way against the other views' balls of its class, and the triangulations
from different source views are merged; ligand atoms whose balls were not detected come
from the grey ligand-carbon points (and the O/N points bonded to them), thinned to about one
bond apart. Pocket atoms are not drawn as balls; the fused
centre-line points of each class are thinned to pseudo-atoms about one bond apart, grouped
into residues by their carbon colour and connectivity.

The record (:class:`Reconstruction`) is in Å in the front frame of the pictured state, the
same frame as ``scene_from_complex(cx, "front").coords``; :func:`reconstruction_scene`
turns it into a :class:`~misi_agent.scene.Scene` for the analysis-by-synthesis solvers and
:func:`cloud_points` into the matching points (every fused centre-line point, so sticks are
predicted as densely as the images draw them).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

from misi_agent.camera import FOV_DEG, VIEW_NAMES, view_rotation
from misi_agent.errors import MisiError
from misi_agent.tools.atom_detection import (
    BACKGROUND,
    DEFAULT_CLASSES,
    POCKET_CLASSES,
    ImageAnalysis,
    analyse_image,
    as_rgb,
    find_balls,
)

SWEEP_RANGE = 0.32  # normalised depth half-range swept around the centroid (the fitted sphere is < 0.26)
SWEEP_STEP = 0.0015  # normalised (about 0.15 Å at D = 100)
OCCLUDED_PX = 2.5  # cost of landing on another colour's pixel in a view (hidden there)
OUTSIDE_PX = 2.5  # cost of landing outside a view
ACCEPT_PX = 1.6  # mean cost per other view for a swept point to be kept
SEEN_PX = 1.0  # at least one other view must show the point's class this close
AMBIGUOUS_PX = 0.6  # a second depth (farther than AMBIGUOUS_DEPTH) this close in cost makes a pixel ambiguous
AMBIGUOUS_DEPTH = 0.012  # normalised (about 1.2 Å)
FUSE_CELL = 0.004  # normalised grid cell for fusing points from the source views
BALL_MATCH_PX = 2.0  # a ball's centre must be this close to a same-class ball in another view
BALL_MERGE = 0.008  # normalised: triangulated balls closer than this are one atom
BALL_RIDGE_FACTOR = 1.4  # O/N centre-line pixels this many stick half-widths wide count as ball centres
ATOM_SPACING_A = 1.3  # Å between pseudo-atoms along the pocket's sticks
BALL_RADIUS_A = 0.45  # Å: the radius the pictures draw ligand balls with (ball-and-stick, render/base.py)
LIGAND_NN_BOND_A = 1.39  # Å: median nearest-neighbour distance among a ligand's heavy atoms (aromatic/sp3 mix)
DEFAULT_DISTANCE_A = 110.0  # Å, the camera distance assumed when nothing in the pictures has a known size
BALL_SCALE_SOURCE = "apparent size"  # how a scale_source set by the ligand balls' sizes begins (the other sources,
# a few ligand bond lengths or the default, may be far off where PyMOL's labels cover the ligand)
MAX_RIDGE_POINTS = 6000  # centre-line pixels swept per source view (evenly thinned beyond this)
RELIABLE_BALL_PX = 0.8  # mean re-projection cost (px) of a ligand atom trusted for the scale
HALF_BOND_A = 1.0  # Å: O/N points this close to a ligand carbon point belong to the ligand
BOND_MAX_A = 1.9  # Å: atoms closer than this are bonded
RESIDUE_LINK_A = 2.7  # Å: pocket carbons of one colour this close are one residue. Pseudo-atoms sit 1.3 Å apart
# along the sticks, with gaps where the views hide a stick; carbons of two residues come no closer than ~3.4 Å
# (van der Waals contact). Measured on 12 raster T9 pictures: 1.9 -> 2.7 Å takes the groups near the ligand
# whose label is right from 57 of 361 to 95 of 279, purity unchanged (eval/results/image_hbonds_residue_fit.md)
LIGAND_HETERO_A = 1.65  # Å: a pocket N/O point this close to a ligand atom is bonded to it (with_ligand_heteroatoms)
POCKET_BOND_A = 1.6  # Å: ... and is the ligand's when no other pocket point (carbon, S, …) is this close
POCKET_SIGMA_A = 0.3  # Å added to a pocket pseudo-atom's uncertainty (it lies on a stick, not on a ball)


class ReconstructionError(MisiError):
    """Images that cannot be reconstructed (unknown view names, too few views, no atoms seen)."""


@dataclass(frozen=True)
class Reconstruction:
    """The pictured atoms in 3D, reconstructed from the views alone.

    ``coords`` are Å in the front-view frame of the pictured state (the frame of
    ``scene_from_complex(cx, "front").coords``: camera at the origin looking down −z, the
    displayed atoms' centroid at (0, 0, −distance)). ``classes`` are colour classes as
    :mod:`misi_agent.tools.atom_detection` names them (``O``, ``N``, ``LIGAND_C``,
    ``POCKET_C0``, ``POCKET_C1``, ``S``, ...); ``residue`` groups pocket atoms (−1 for the
    ligand); ``sigma`` is each atom's uncertainty in Å (larger when fewer views see it);
    ``image_xy[view]`` the pixel centre of each atom in that view (nan where not seen).
    ``cloud``/``cloud_classes`` are all fused centre-line points (Å, same frame) and their
    classes, which is what the pictures' sticks are matched against. ``distance`` is the
    camera distance in Å (the Å scale), ``scale_source`` how it was obtained.
    """

    coords: np.ndarray
    classes: np.ndarray
    is_ligand: np.ndarray
    residue: np.ndarray
    sigma: np.ndarray
    bonds: np.ndarray
    views: tuple[str, ...]
    image_xy: dict
    residual_px: float
    scale_source: str
    distance: float = DEFAULT_DISTANCE_A
    cloud: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    cloud_classes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype="<U9"))
    image_size: tuple[int, int] = (512, 512)
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.coords.shape[0])

    @property
    def center(self) -> np.ndarray:
        """The centre of rotation of the commands: the displayed atoms' centroid, on the line of sight."""
        return np.array([0.0, 0.0, -self.distance])

    def summary(self) -> dict[str, Any]:
        """Counts and quality figures as plain JSON types."""
        cls, n = np.unique(self.classes, return_counts=True)
        return {"n_atoms": len(self), "n_ligand_atoms": int(self.is_ligand.sum()),
                "n_residue_groups": int(len(np.unique(self.residue[self.residue >= 0]))),
                "classes": {str(c): int(k) for c, k in zip(cls, n)}, "n_bonds": int(len(self.bonds)),
                "views": list(self.views), "distance_A": round(float(self.distance), 2),
                "scale_source": self.scale_source, "residual_px": round(float(self.residual_px), 3),
                "median_sigma_A": round(float(np.median(self.sigma)), 3) if len(self) else None,
                "n_cloud_points": int(len(self.cloud)), "notes": list(self.notes)}


# ----------------------------------------------------------------------------- cameras


@dataclass(frozen=True)
class NormView:
    """One canonical view in normalised units: the centroid at depth ``distance`` (1 for the initial views; a view
    after ``move z d`` of a scene D Å away sees it at 1 − d / D) on the optical axis."""

    name: str
    width: int
    height: int
    focal: float
    R: np.ndarray  # front frame (centroid-relative) -> this view's frame
    distance: float = 1.0

    def project(self, P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pixels (..., 2) and depths (...) of centroid-relative normalised front-frame points (..., 3)
        (nan pixels behind the camera)."""
        q = np.asarray(P, float) @ self.R.T
        depth = self.distance - q[..., 2]
        safe = np.where(depth > 1e-6, depth, np.nan)
        return np.stack([self.width / 2.0 + self.focal * q[..., 0] / safe,
                         self.height / 2.0 - self.focal * q[..., 1] / safe], axis=-1), depth

    def rays(self, uv: np.ndarray) -> np.ndarray:
        """Per pixel the (dx, dy) slope of its ray: a point at depth t is (dx t, dy t, distance − t) in this view's
        frame."""
        return np.stack([(uv[:, 0] - self.width / 2.0) / self.focal, -(uv[:, 1] - self.height / 2.0) / self.focal], 1)

    def unproject(self, uv: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Front-frame normalised points of pixels ``uv`` at depths ``t``."""
        s = self.rays(uv)
        q = np.stack([s[:, 0] * t, s[:, 1] * t, self.distance - t], axis=1)
        return q @ self.R


@dataclass
class ViewData:
    """One view's analysis: its camera, class distance maps, foreground, centre lines and balls."""

    cam: NormView
    an: ImageAnalysis
    dist: dict[str, np.ndarray]  # class -> (H, W) px to the nearest pixel of that class
    fg: np.ndarray  # (H, W) bool: anything drawn (atoms, sticks, labels)
    balls: list
    ball_dist: dict[str, np.ndarray]

    def cost(self, cls: str, uv: np.ndarray, use_balls: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(cost px, seen) of points of class ``cls`` landing at ``uv`` in this view."""
        h, w = self.fg.shape
        maps = self.ball_dist if use_balls else self.dist
        d = maps.get(cls)
        u, v = uv[..., 0], uv[..., 1]
        inside = np.isfinite(u) & np.isfinite(v) & (u >= 0) & (u < w) & (v >= 0) & (v < h)
        ui = np.clip(np.nan_to_num(u).astype(int), 0, w - 1)
        vi = np.clip(np.nan_to_num(v).astype(int), 0, h - 1)
        dd = d[vi, ui] if d is not None else np.full(u.shape, 99.0)
        fg = self.fg[vi, ui]
        c = np.where(fg, np.minimum(dd, OCCLUDED_PX), dd)
        c = np.where(inside, c, OUTSIDE_PX)
        return c, inside & (dd <= SEEN_PX)


def _view_data(name: str, image: Any, fov_deg: float, classes: Sequence[str]) -> ViewData:
    rgb = as_rgb(image)
    an = analyse_image(rgb, classes)
    h, w = an.dt.shape
    focal = (w / 2.0) / math.tan(math.radians(fov_deg) / 2.0)
    cam = NormView(name, w, h, focal, view_rotation(name))
    label = an.pixels.label
    dist = {}
    for k, n in enumerate(an.names):
        m = label == k
        if m.any():
            dist[n] = ndimage.distance_transform_edt(~m).astype(np.float32)
    fg = label != BACKGROUND
    balls = find_balls(an)
    ball_dist = {}  # per ligand class: distance to a detected ball centre or a centre-line pixel of the class
    for cls in {"O", "N", "LIGAND_C"} | {b.color_class for b in balls}:
        m = np.zeros((h, w), bool)
        for b in balls:
            if b.color_class == cls:
                m[min(h - 1, int(b.y)), min(w - 1, int(b.x))] = True
        ridge = an.ridge.get(cls)
        if ridge is not None and len(ridge):  # ball-wide centre-line pixels (a ball whose peak was not detected)
            wide = an.ridge_width[cls] >= BALL_RIDGE_FACTOR * an.halfwidth
            ridge = ridge[wide] if cls != "LIGAND_C" else ridge
            m[np.clip(ridge[:, 1].astype(int), 0, h - 1), np.clip(ridge[:, 0].astype(int), 0, w - 1)] = True
        if m.any():
            ball_dist[cls] = ndimage.distance_transform_edt(~m).astype(np.float32)
    return ViewData(cam, an, dist, fg, balls, ball_dist)


# ----------------------------------------------------------------------------- plane sweep


def _sweep(src: ViewData, others: Sequence[ViewData], uv: np.ndarray, cls: np.ndarray, use_balls: bool = False,
           chunk: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For pixels ``uv`` of classes ``cls`` in ``src``: best depth, its mean cost per other view, whether
    another view sees it, and whether a distant second depth is nearly as good (ambiguous)."""
    centre = src.cam.distance  # the centroid's depth: 1 for the canonical views the reconstruction is built from
    ts = np.arange(centre - SWEEP_RANGE, centre + SWEEP_RANGE + 1e-9, SWEEP_STEP)
    n = len(uv)
    best_t = np.full(n, np.nan)
    best_c = np.full(n, np.inf)
    seen = np.zeros(n, bool)
    ambiguous = np.zeros(n, bool)
    slopes = src.cam.rays(uv)
    Rt = src.cam.R
    gap = int(round(AMBIGUOUS_DEPTH / SWEEP_STEP))
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        s = slopes[a:b]
        q = np.stack([s[:, None, 0] * ts[None], s[:, None, 1] * ts[None],
                      centre - np.broadcast_to(ts, (b - a, len(ts)))], -1)
        P = q @ Rt  # (m, T, 3) front frame
        total = np.zeros((b - a, len(ts)))
        seen_any = np.zeros((b - a, len(ts)), bool)
        for ov in others:
            uvo, _ = ov.cam.project(P.reshape(-1, 3))
            uvo = uvo.reshape(b - a, len(ts), 2)
            c = np.empty((b - a, len(ts)))
            sn = np.zeros((b - a, len(ts)), bool)
            for k in np.unique(cls[a:b]):
                rows = np.flatnonzero(cls[a:b] == k)
                c[rows], sn[rows] = ov.cost(str(k), uvo[rows], use_balls)
            total += c
            seen_any |= sn
        total /= max(1, len(others))
        total = np.where(seen_any, total, total + 1.0)
        j = np.argmin(total, axis=1)
        r = np.arange(b - a)
        best_t[a:b] = ts[j]
        best_c[a:b] = total[r, j]
        seen[a:b] = seen_any[r, j]
        idx = np.arange(len(ts))[None]
        far = np.abs(idx - j[:, None]) > gap
        second = np.where(far, total, np.inf).min(axis=1)
        ambiguous[a:b] = second < best_c[a:b] + AMBIGUOUS_PX
    return best_t, best_c, seen, ambiguous


def _ridge_points(vd: ViewData, skip: Sequence[str] = ()) -> tuple[np.ndarray, np.ndarray]:
    pts, cls = [], []
    for n, p in vd.an.ridge.items():
        if n in skip or not len(p):
            continue
        pts.append(p)
        cls.append(np.full(len(p), n, dtype="<U9"))
    if not pts:
        return np.zeros((0, 2)), np.zeros(0, dtype="<U9")
    pts, cls = np.concatenate(pts), np.concatenate(cls)
    if len(pts) > MAX_RIDGE_POINTS:
        keep = np.linspace(0, len(pts) - 1, MAX_RIDGE_POINTS).astype(int)
        pts, cls = pts[keep], cls[keep]
    return pts, cls


def _fuse(P: np.ndarray, cls: np.ndarray, cell: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Average points of one class per grid cell; returns points, classes, support counts."""
    if not len(P):
        return P, cls, np.zeros(0, int)
    keys = np.floor(P / cell).astype(np.int64)
    cids = np.unique(cls, return_inverse=True)[1]
    full = np.column_stack([keys, cids])
    uniq, inv, counts = np.unique(full, axis=0, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    out = np.zeros((len(uniq), 3))
    np.add.at(out, inv, P)
    out /= counts[:, None]
    first = np.zeros(len(uniq), int)
    first[inv[::-1]] = np.arange(len(inv))[::-1]
    return out, cls[first], counts


def _reproject_cost(views: Sequence[ViewData], P: np.ndarray, cls: np.ndarray, use_balls: bool = False
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Mean cost over all views and how many views see each point's class directly."""
    cost = np.zeros(len(P))
    nseen = np.zeros(len(P), int)
    for vd in views:
        _, c, s = _view_cost(vd, P, cls, use_balls)
        cost += c
        nseen += s
    return cost / max(1, len(views)), nseen


def _view_cost(vd: "ViewData", P: np.ndarray, cls: np.ndarray, use_balls: bool
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pixel positions of points ``P`` in one view, their cost against the view's pixels of their
    class, and whether the view shows their class there."""
    uv, _ = vd.cam.project(P)
    c = np.zeros(len(P))
    s = np.zeros(len(P), bool)
    for k in np.unique(cls):
        rows = np.flatnonzero(cls == k)
        c[rows], s[rows] = vd.cost(str(k), uv[rows], use_balls)
    return uv, c, s


# ----------------------------------------------------------------------------- atoms


def _ligand_atoms(views: Sequence[ViewData]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Triangulated ligand balls (normalised front frame), their classes, how many views see them and
    their mean re-projection cost (px)."""
    P, C = [], []
    for i, src in enumerate(views):
        if not src.balls:
            continue
        uv = np.array([[b.x, b.y] for b in src.balls])
        cls = np.array([b.color_class for b in src.balls], dtype="<U9")
        others = [v for j, v in enumerate(views) if j != i]
        t, c, seen, _ = _sweep(src, others, uv, cls, use_balls=True)
        ok = seen & (c <= BALL_MATCH_PX)
        if ok.any():
            P.append(src.cam.unproject(uv[ok], t[ok]))
            C.append(cls[ok])
    if not P:
        return np.zeros((0, 3)), np.zeros(0, dtype="<U9"), np.zeros(0, int), np.zeros(0)
    P, C = np.concatenate(P), np.concatenate(C)
    # one atom = the triangulations that land on the same detected ball in at least two views, or that
    # are very close (union-find); its position is their mean
    ids = np.full((len(P), len(views)), -1)
    for j, vd in enumerate(views):
        if not vd.balls:
            continue
        uv, _ = vd.cam.project(P)
        centres = np.array([[b.x, b.y] for b in vd.balls])
        radii = np.array([b.radius for b in vd.balls])
        bcls = np.array([b.color_class for b in vd.balls])
        d, k = cKDTree(centres).query(np.nan_to_num(uv, nan=-1e6))
        ok = np.isfinite(d) & (d <= np.maximum(1.5, 0.6 * radii[np.minimum(k, len(radii) - 1)]))
        ok &= bcls[np.minimum(k, len(radii) - 1)] == C
        ids[ok, j] = k[ok]
    parent = np.arange(len(P))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    tree = cKDTree(P)
    for a in range(len(P)):
        for b in range(a + 1, len(P)):
            if C[a] != C[b]:
                continue
            shared = int(np.count_nonzero((ids[a] >= 0) & (ids[a] == ids[b])))
            if shared >= 2 or np.linalg.norm(P[a] - P[b]) < BALL_MERGE:
                parent[find(a)] = find(b)
    roots = np.array([find(a) for a in range(len(P))])
    out, oc = [], []
    for r in np.unique(roots):
        grp = roots == r
        out.append(P[grp].mean(axis=0))
        oc.append(C[grp][0])
    out = np.array(out)
    oc = np.array(oc, dtype="<U9")
    cost, nseen = _reproject_cost(views, out, oc, use_balls=True)
    keep = nseen >= 2
    return out[keep], oc[keep], nseen[keep], cost[keep]


def _thin(P: np.ndarray, spacing: float) -> np.ndarray:
    """Indices of a subset of points at least ``spacing`` apart (greedy, in order)."""
    if not len(P):
        return np.zeros(0, int)
    tree = cKDTree(P)
    taken = np.zeros(len(P), bool)
    blocked = np.zeros(len(P), bool)
    for i in range(len(P)):
        if blocked[i]:
            continue
        taken[i] = True
        blocked[tree.query_ball_point(P[i], spacing)] = True
    return np.flatnonzero(taken)


def estimate_distance(lig: np.ndarray, reliable: np.ndarray | None = None) -> tuple[float | None, str]:
    """The camera distance in Å from the ligand's bonds.

    Among the triangulated ligand atoms (normalised units) that every view sees and that
    re-project well (``reliable``), each atom's nearest neighbour is a bonded atom; their
    median, trimmed of duplicates and gaps (kept within 0.75-1.3 × the median, three rounds),
    corresponds to :data:`LIGAND_NN_BOND_A` (the median over PoseBusters ligands is 1.38 Å,
    interquartile range 1.36-1.42 Å).
    """
    pts = lig if reliable is None or np.count_nonzero(reliable) < 4 else lig[reliable]
    if len(pts) < 4:
        return None, "too few ligand atoms for a bond-length scale"
    d, _ = cKDTree(pts).query(pts, k=2)
    nn = d[:, 1]
    nn = nn[nn > 0]
    if len(nn) < 4:
        return None, "too few ligand bonds"
    m = float(np.median(nn))
    for _ in range(3):
        kept = nn[(nn >= 0.75 * m) & (nn <= 1.3 * m)]
        if len(kept) < 3:
            break
        m = float(np.median(kept))
    return LIGAND_NN_BOND_A / m, (f"ligand bond lengths (trimmed median nearest-neighbour distance of {len(pts)} "
                                  f"well-seen ligand atoms = {LIGAND_NN_BOND_A} Å)")


def ball_radius_distance(views: Sequence[ViewData], lig: np.ndarray) -> tuple[float | None, str]:
    """The camera distance in Å from the apparent size of the ligand's balls.

    A ball of radius :data:`BALL_RADIUS_A` at normalised depth t appears with radius
    f · r / (t · D) px, so every detected ball that a triangulated ligand atom projects onto
    gives one estimate of D; the median over all views is returned (about ±5 % on the
    fixtures, better than the ligand's bond lengths, whose chemistry alone varies ±2 % and
    whose atoms are often incompletely triangulated).
    """
    est = []
    for vd in views:
        if not vd.balls or not len(lig):
            continue
        uv, depth = vd.cam.project(lig)
        centres = np.array([[b.x, b.y] for b in vd.balls])
        radii = np.array([b.radius for b in vd.balls])
        d, k = cKDTree(centres).query(np.nan_to_num(uv, nan=-1e6))
        ok = np.isfinite(d) & (d < 1.5) & (depth > 0)
        est += list(vd.cam.focal * BALL_RADIUS_A / (radii[k[ok]] * depth[ok]))
    if len(est) < 3:
        return None, "too few ligand balls for a ball-size scale"
    return float(np.median(est)), f"{BALL_SCALE_SOURCE} of {len(est)} ligand balls ({BALL_RADIUS_A} Å radius)"


def with_ligand_phosphorus(coords: np.ndarray, classes: np.ndarray, is_lig: np.ndarray) -> np.ndarray:
    """``is_lig`` with every P point bonded (within :data:`BOND_MAX_A`, ``coords`` in Å) to a ligand atom added.

    No standard residue has phosphorus, so a P bonded to the ligand is the ligand's. A phosphate's P sits a bond
    away from every ligand carbon, so the ligand (grey carbons and the points bonded to them) left it to the
    pocket and its O stood alone: typed as water-like hydroxyls, the phosphate gave H-bonds to Asp and backbone
    O that the structure does not have. Only P bonded to a ligand atom: a stray P-coloured point elsewhere stays.
    """
    coords = np.asarray(coords, float)
    is_lig = np.asarray(is_lig, bool).copy()
    p = np.flatnonzero((np.asarray(classes) == "P") & ~is_lig)
    if len(p) and is_lig.any():
        # a second pass: another point of the same drawn P (the thinned cloud keeps points ATOM_SPACING_A apart)
        # joins through the one bonded to the ligand; two P are never bonded to each other
        for _ in range(2):
            tree = cKDTree(coords[is_lig])
            near = p[tree.query(coords[p])[0] < BOND_MAX_A]
            if not len(near):
                break
            is_lig[near] = True
            p = np.setdiff1d(p, near)
    return is_lig


def groups_and_bonds(coords: np.ndarray, classes: np.ndarray, is_lig: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Residue group per atom (-1 for the ligand) and bonds (ligand atoms by distance, pocket points of one
    group by distance) for a ligand/pocket split of the points (``coords`` in Å)."""
    coords = np.asarray(coords, float)
    is_lig = np.asarray(is_lig, bool)
    residue = _residues(coords, np.asarray(classes), is_lig, RESIDUE_LINK_A)
    residue[is_lig] = -1
    bonds = []
    if len(coords):
        for a, b in cKDTree(coords).query_pairs(BOND_MAX_A):
            if is_lig[a] == is_lig[b] and (is_lig[a] or residue[a] == residue[b]):
                bonds.append((a, b))
    return residue, np.array(sorted(bonds), int).reshape(-1, 2)


def with_ligand_heteroatoms(coords: np.ndarray, classes: np.ndarray, is_lig: np.ndarray) -> np.ndarray:
    """``is_lig`` with every pocket N/O point bonded to a ligand atom and to no other pocket point (carbon, S, …)
    added (``coords`` in Å).

    The ligand takes an N/O point only within a half-bond of one of its carbon points (``HALF_BOND_A``), so an
    O on a phosphate, or one whose carbon the pictures placed a little off, is left to the pocket, where it
    stands alone or joins a residue it does not belong to, and the ligand atom it is goes missing from the
    H-bonds. No pocket atom lies within a bond of a ligand atom (an H-bond is 2.5 Å or more), and a residue's
    N/O sits a bond from one of the residue's carbon points: so an N/O within :data:`LIGAND_HETERO_A` of a ligand
    atom and farther than :data:`POCKET_BOND_A` from every pocket point that is not N/O is the ligand's. One
    pass: the new atoms do not pull in others. Measured on the 20 raster T9 items: 30 points moved, 22 of them true ligand
    atoms, 8 points that match no atom, none a pocket atom (``eval/results/image_hbonds_residue_fit.md``).
    """
    coords = np.asarray(coords, float)
    classes = np.asarray(classes)
    is_lig = np.asarray(is_lig, bool).copy()
    cand = np.flatnonzero(np.isin(classes, ["N", "O"]) & ~is_lig)
    other = np.flatnonzero(~is_lig & ~np.isin(classes, ["N", "O"]))
    if not len(cand) or not is_lig.any():
        return is_lig
    near_lig = cKDTree(coords[is_lig]).query(coords[cand])[0] <= LIGAND_HETERO_A
    far_pocket = cKDTree(coords[other]).query(coords[cand])[0] > POCKET_BOND_A if len(other) else True
    is_lig[cand[near_lig & far_pocket]] = True
    return is_lig


def _residues(P: np.ndarray, cls: np.ndarray, is_lig: np.ndarray, link: float) -> np.ndarray:
    """Residue groups of pocket atoms: connected pocket carbons of one colour; O/N join the nearest carbon group."""
    res = -np.ones(len(P), int)
    carb = np.flatnonzero(np.isin(cls, list(POCKET_CLASSES)) & ~is_lig)
    if not len(carb):
        return res
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(carb.tolist())
    tree = cKDTree(P[carb])
    for a, b in tree.query_pairs(link):
        if cls[carb[a]] == cls[carb[b]]:
            g.add_edge(int(carb[a]), int(carb[b]))
    for k, comp in enumerate(sorted(nx.connected_components(g), key=lambda c: min(c))):
        res[list(comp)] = k
    rest = np.flatnonzero(~is_lig & (res < 0))
    if len(rest):
        d, j = tree.query(P[rest])
        res[rest] = res[carb[j]]
    return res


# ----------------------------------------------------------------------------- main entry


def load_views(images: Mapping[str, Any], fov_deg: float = FOV_DEG, classes: Sequence[str] = DEFAULT_CLASSES
               ) -> list[ViewData]:
    """Every view's analysis (camera, colour classes, distance maps, centre lines, balls), in view order."""
    return _load_views(images, fov_deg, classes)


def _load_views(images: Mapping[str, Any], fov_deg: float, classes: Sequence[str]) -> list[ViewData]:
    if not isinstance(images, Mapping) or not images:
        raise ReconstructionError("reconstruct needs the views as a mapping view name -> image")
    unknown = [v for v in images if v not in VIEW_NAMES]
    if unknown:
        raise ReconstructionError(f"unknown view name(s) {', '.join(map(str, unknown))} (expected {', '.join(VIEW_NAMES)})")
    if len(images) < 2:
        raise ReconstructionError("reconstruct needs at least two views")
    return [_view_data(v, images[v], fov_deg, classes) for v in VIEW_NAMES if v in images]


def reconstruct(images: Mapping[str, Any], *, fov_deg: float = FOV_DEG, distance: float | None = None,
                classes: Sequence[str] = DEFAULT_CLASSES, views: Sequence[ViewData] | None = None) -> Reconstruction:
    """The 3D atoms the views show (see the module docstring).

    ``images`` maps view names (``front``, ``left``, ``top``, and optionally ``back``,
    ``right``, ``bottom``) to images (paths, PIL images or arrays) of one scene drawn with the
    benchmark's conventions. ``distance`` (Å) overrides the bond-length scale when the camera
    distance is known from elsewhere. ``views`` are the images' analyses when the caller already has them
    (:func:`load_views` of the same images), so that they are not made twice.
    """
    views = list(views) if views is not None else _load_views(images, fov_deg, classes)
    # --- ligand balls
    lig, lig_cls, lig_seen, lig_cost = _ligand_atoms(views)
    # --- centre-line cloud
    P, C = [], []
    for i, src in enumerate(views):
        uv, cls = _ridge_points(src)
        if not len(uv):
            continue
        others = [v for j, v in enumerate(views) if j != i]
        t, c, seen, amb = _sweep(src, others, uv, cls)
        ok = seen & (c <= ACCEPT_PX) & ~amb
        P.append(src.cam.unproject(uv[ok], t[ok]))
        C.append(cls[ok])
    P = np.concatenate(P) if P else np.zeros((0, 3))
    C = np.concatenate(C) if C else np.zeros(0, dtype="<U9")
    P, C, support = _fuse(P, C, FUSE_CELL)
    if len(P):
        cost, nseen = _reproject_cost(views, P, C)
        keep = (cost <= ACCEPT_PX) & (nseen >= 2)
        P, C, support, cost = P[keep], C[keep], support[keep], cost[keep]
    else:
        cost = np.zeros(0)
    if not len(P) and not len(lig):
        raise ReconstructionError("no atoms could be matched across the views")
    # --- ligand atoms the balls missed (often, where the balls are hard to tell from the sticks): grey
    # ligand-carbon points and the O/N/other points within a half-bond of them, thinned to about one bond
    # apart, away from the triangulated balls (spacing at a provisional scale)
    D0 = float(distance) if distance is not None else (ball_radius_distance(views, lig)[0] or DEFAULT_DISTANCE_A)
    lig_c = np.flatnonzero(C == "LIGAND_C")
    extra = np.zeros(0, int)
    cloud_is_lig = C == "LIGAND_C"
    if len(lig_c):
        near_c = cKDTree(P[lig_c]).query(P)[0] < (HALF_BOND_A / D0)
        cand = np.flatnonzero(cloud_is_lig | (near_c & ~np.isin(C, list(POCKET_CLASSES))))
        cloud_is_lig[cand] = True
        if len(lig):
            cand = cand[cKDTree(lig).query(P[cand])[0] > (HALF_BOND_A / D0)]
        cand = cand[np.argsort(-support[cand], kind="stable")]
        parts = [cand[C[cand] == k][_thin(P[cand[C[cand] == k]], ATOM_SPACING_A / D0)] for k in np.unique(C[cand])]
        extra = np.concatenate(parts) if parts else extra
    if len(extra):
        lig = np.concatenate([lig, P[extra]])
        lig_cls = np.concatenate([lig_cls, C[extra]]).astype("<U9")
        lig_seen = np.concatenate([lig_seen, np.full(len(extra), 2)])
        lig_cost = np.concatenate([lig_cost, cost[extra]])
    # --- scale
    notes = []
    if distance is not None:
        D, source = float(distance), "given camera distance"
    else:
        D, source = ball_radius_distance(views, lig)
        if D is None:
            notes.append(source)
            D, source = estimate_distance(lig, (lig_seen >= len(views)) & (lig_cost <= RELIABLE_BALL_PX))
        if D is None:
            notes.append(source)
            D, source = DEFAULT_DISTANCE_A, f"default camera distance {DEFAULT_DISTANCE_A:g} Å (no ligand bonds seen)"
    # --- atoms: ligand balls, then pocket pseudo-atoms thinned from the cloud (away from the ligand's balls)
    if len(lig) and len(P):
        dl, _ = cKDTree(lig).query(P)
        cloud_is_lig |= dl < (0.9 / D)
    pocket_idx = np.flatnonzero(~cloud_is_lig)
    order = pocket_idx[np.argsort(-support[pocket_idx], kind="stable")]
    atoms_idx = []
    for k in np.unique(C[order]):
        sel = order[C[order] == k]
        atoms_idx.append(sel[_thin(P[sel], ATOM_SPACING_A / D)])
    atoms_idx = np.concatenate(atoms_idx) if atoms_idx else np.zeros(0, int)
    coords_n = np.concatenate([lig, P[atoms_idx]]) if len(atoms_idx) else lig
    classes_ = np.concatenate([lig_cls, C[atoms_idx]]).astype("<U9")
    is_lig = np.concatenate([np.ones(len(lig), bool), np.zeros(len(atoms_idx), bool)])
    is_lig = with_ligand_phosphorus(coords_n * D, classes_, is_lig)
    seen_n = np.concatenate([lig_seen, np.full(len(atoms_idx), 2)])
    # coordinates in Å in the front camera frame
    coords = coords_n * D + np.array([0.0, 0.0, -D])
    cloud = P * D + np.array([0.0, 0.0, -D])
    residue, bonds = groups_and_bonds(coords, classes_, is_lig)
    # per-atom uncertainty: the sweep step and a view-count factor, in Å
    n_views = len(views)
    base = max(0.25, 0.5 * (1.0 / views[0].cam.focal) * D * 2)  # about a pixel at the centroid's depth
    sigma = base * np.sqrt(n_views / np.maximum(seen_n, 1)) + np.where(is_lig, 0.0, POCKET_SIGMA_A)
    image_xy = {}
    for vd in views:
        uv, _, sn = _view_cost(vd, coords_n, classes_, use_balls=False)
        xy = uv.copy()
        xy[~sn] = np.nan
        image_xy[vd.cam.name] = xy
    residual = float(np.median(cost)) if len(cost) else float("nan")
    return Reconstruction(coords=coords, classes=classes_, is_ligand=is_lig, residue=residue, sigma=sigma, bonds=bonds,
                          views=tuple(v.cam.name for v in views), image_xy=image_xy, residual_px=residual,
                          scale_source=source, distance=float(D), cloud=cloud, cloud_classes=C.astype("<U9"),
                          image_size=(views[0].cam.width, views[0].cam.height), notes=tuple(notes))
