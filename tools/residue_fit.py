"""Fit a residue's ideal geometry to the pictures: pocket atoms at their real places, not along sticks.

The reconstruction (:mod:`misi_agent.tools.reconstruction`) puts pocket atoms as pseudo-atoms
thinned from the sticks' fused centre lines, about 1 Å off and often incomplete, which is more
than the H-bond criteria forgive (0.4 Å). But a residue is not free-form: its bond lengths and
angles are those of its wwPDB CCD ideal coordinates to about 0.02 Å, and what varies between
pictures is only its pose (6 numbers) and its torsions (the side chain's χ angles and the
carbonyl's turn about CA–C). So each residue is fitted as that articulated model:

* the model's sticks are sampled every ≈ 0.25 Å, each sample carrying the colour class of the
  atom whose half of the stick it lies on (carbons take the residue's drawn carbon colour);
* in every view a sample costs the sub-pixel distance (bilinear on the distance map) to the
  nearest pixel of its class, capped, and to at most :data:`OCCLUDED_PX` where another colour
  covers the spot (hidden behind it); the residue's own carbon centre-line pixels near the
  model cost their distance to the nearest projected sample (so the model must cover the
  drawn residue, not just lie inside it);
* :func:`scipy.optimize.least_squares` (soft-L1) moves pose and torsions; starts come from
  the named atoms when identity matched them, else from a few orientations and rotamers
  fitted in 3D to the residue's reconstructed centre-line points first.

Optionally the camera distance (the Å scale) is fitted too: a model of known size in Å seen
in perspective fixes it (``fit_residue(..., free_scale=True)``).

A fit evaluates its residuals thousands of times (finite-difference Jacobians over pose and torsions),
each a little numpy work, so they are computed for a batch of parameter sets at once: all views and
classes in one gather, the rotations by Rodrigues' formula, every Jacobian step in one batch
(:func:`forward_jacobian`, scipy's steps). ``benchmarks/residue_fit_speed.py`` measures it against the
first, one-call-per-step version.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Sequence

import numpy as np
from scipy import ndimage
from scipy.optimize import least_squares
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from misi_agent.tools.geometry import dihedral, kabsch

SAMPLE_A = 0.25  # Å between samples along a stick
CAP_PX = 4.0  # a sample's cost is capped here (a part missing from a view does not dominate)
OCCLUDED_PX = 1.5  # a sample landing on another colour: possibly hidden behind it
REVERSE_REACH_PX = 6.0  # the residue's own carbon pixels this close to the model's projection are explained by it
ELEMENT_CLASS = {"N": "N", "O": "O", "S": "S", "SE": "S"}


@dataclass(frozen=True)
class ResidueModel:
    """A residue's heavy atoms in ideal geometry with its rotatable bonds."""

    name: str
    atom_names: tuple[str, ...]
    elements: tuple[str, ...]
    coords: np.ndarray  # (N, 3) Å, ideal
    bonds: np.ndarray  # (M, 2)
    torsions: tuple[tuple[int, int, tuple[int, ...]], ...]  # (a, b, atoms moved by turning about a->b)


@lru_cache(maxsize=64)
def residue_model(name: str, terminal: bool = False) -> ResidueModel | None:
    """The CCD ideal residue ``name`` (OXT only when ``terminal``) and its rotatable bonds: non-ring
    single bonds between two atoms that each have another heavy neighbour (the smaller side turns)."""
    import networkx as nx

    from misi_agent.structure import ccd_template

    t = ccd_template(name)
    if t is None or t.array_length() == 0:
        return None
    keep = np.array([terminal or n != "OXT" for n in t.atom_name])
    idx = np.flatnonzero(keep)
    pos = {int(i): k for k, i in enumerate(idx)}
    bonds = [(pos[int(a)], pos[int(b)]) for a, b, _ in t.bonds.as_array() if int(a) in pos and int(b) in pos]
    g = nx.Graph()
    g.add_nodes_from(range(len(idx)))
    g.add_edges_from(bonds)
    ring_edges = {frozenset(e) for cyc in nx.cycle_basis(g) for e in zip(cyc, cyc[1:] + cyc[:1])}
    tors = []
    for a, b in bonds:
        if frozenset((a, b)) in ring_edges or g.degree[a] < 2 or g.degree[b] < 2:
            continue
        h = g.copy()
        h.remove_edge(a, b)
        side_b = nx.node_connected_component(h, b)
        side_a = nx.node_connected_component(h, a)
        if len(side_b) <= len(side_a):
            tors.append((a, b, tuple(sorted(side_b - {b}))))
        else:
            tors.append((b, a, tuple(sorted(side_a - {a}))))
    return ResidueModel(name, tuple(str(n) for n in t.atom_name[idx]), tuple(str(e).upper() for e in t.element[idx]),
                        np.asarray(t.coord[idx], float), np.array(bonds, int).reshape(-1, 2), tuple(tors))


def articulate(model: ResidueModel, torsion_deltas: np.ndarray) -> np.ndarray:
    """The model's coordinates with each rotatable bond turned by its delta (radians), in the model frame."""
    return articulate_many(model, np.asarray(torsion_deltas, float)[None])[0]


def articulate_many(model: ResidueModel, torsion_deltas: np.ndarray) -> np.ndarray:
    """:func:`articulate` for a batch of torsion sets (B, torsions) -> (B, atoms, 3)."""
    B = len(torsion_deltas)
    X = np.repeat(model.coords[None], B, axis=0)
    for j, (a, b, moved) in enumerate(model.torsions):
        th = torsion_deltas[:, j]
        if not moved or not np.any(th):
            continue
        m = np.array(moved)
        pivot = X[:, b][:, None]
        X[:, m] = np.einsum("bij,bnj->bni", rotvec_matrices(X[:, b] - X[:, a], th), X[:, m] - pivot) + pivot
    return X


def rotvec_matrices(axes: np.ndarray, angles: np.ndarray | None = None) -> np.ndarray:
    """Rotation matrices (B, 3, 3) by ``angles`` radians about ``axes`` (B, 3; any length), or by the rotation
    vectors ``axes`` (angle = length) when no angles are given: Rodrigues' formula over the batch, because the
    fit evaluates thousands of them per residue and scipy's ``Rotation`` costs far more per call."""
    axes = np.asarray(axes, float)
    n = np.linalg.norm(axes, axis=1)
    angle = n if angles is None else np.asarray(angles, float)
    turn = (n > 0.0) & (angle != 0.0)
    x, y, z = (axes / np.where(n > 0.0, n, 1.0)[:, None]).T
    c, s = np.where(turn, np.cos(angle), 1.0), np.where(turn, np.sin(angle), 0.0)
    t = 1.0 - c
    return np.stack([c + t * x * x, t * x * y - s * z, t * x * z + s * y,
                     t * x * y + s * z, c + t * y * y, t * y * z - s * x,
                     t * x * z - s * y, t * y * z + s * x, c + t * z * z], axis=1).reshape(-1, 3, 3)


def forward_jacobian(fun_many, x: np.ndarray, rel_step: float | None, dtype=np.float64) -> np.ndarray:
    """The forward-difference Jacobian of ``fun_many`` (a batch of parameter sets (B, n) -> residuals (B, m)) at
    ``x``, with the steps scipy's ``approx_derivative`` (2-point) takes: ``rel_step`` × |x|, or where that
    vanishes (x = 0, or no ``rel_step``) √ε × max(1, |x|) for the residuals' float ``dtype``. All n steps go
    through ``fun_many`` as one batch: the fits' residuals are small numpy work, and one call per step spent
    most of a fit on call overhead."""
    x = np.asarray(x, float)
    sign = np.where(x >= 0.0, 1.0, -1.0)
    fallback = np.finfo(dtype).eps ** 0.5 * sign * np.maximum(1.0, np.abs(x))
    if rel_step is None:
        h = fallback
    else:
        h = rel_step * sign * np.abs(x)
        h = np.where((x + h) - x == 0.0, fallback, h)
    F = fun_many(np.vstack([x, x + np.diag(h)]))
    return ((F[1:] - F[0]) / ((x + h) - x)[:, None]).T


def nearest_distances(targets: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Distance (B, N) from each of ``targets`` (N, k) to its nearest of ``points`` (B, S, k), per batch member.

    The nearest point is found with one matrix product (|t|² + |p|² − 2 t·p, about the targets' centroid), then
    its distance is taken exactly, as a k-d tree gives it: the expanded form loses digits at tiny distances,
    where the finite-difference Jacobians would feel it."""
    mu = targets.mean(0)
    t, p = targets - mu, points - mu
    d2 = (t * t).sum(1)[None, :, None] + (p * p).sum(2)[:, None, :] - 2.0 * np.matmul(t, p.transpose(0, 2, 1))
    j = d2.argmin(axis=2)  # (B, N)
    gap = targets[None] - np.take_along_axis(points, j[..., None], axis=1)
    return np.sqrt((gap * gap).sum(axis=2))


def _samples(model: ResidueModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per sample: bond index, fraction along it, and the atom (end) whose colour it carries."""
    bi, fr, owner = [], [], []
    for k, (a, b) in enumerate(model.bonds):
        L = float(np.linalg.norm(model.coords[a] - model.coords[b]))
        n = max(3, int(round(L / SAMPLE_A)))
        for f in (np.arange(n) + 0.5) / n:
            bi.append(k)
            fr.append(f)
            owner.append(a if f < 0.5 else b)
    return np.array(bi), np.array(fr), np.array(owner)


def atom_class(element: str, carbon_class: str) -> str:
    return carbon_class if element == "C" else ELEMENT_CLASS.get(element, element)


@dataclass
class ViewCostMap:
    """One view's per-class cost maps for the fit (px), built once from the reconstruction's view data."""

    cam: object
    maps: dict
    ridge: dict

    @staticmethod
    def of(vd, classes: Sequence[str]) -> "ViewCostMap":
        maps = {}
        fg = vd.fg
        for c in classes:
            d = vd.dist.get(c)
            if d is None:
                m = np.where(fg, OCCLUDED_PX, CAP_PX).astype(np.float32)
            else:
                own = d <= 0.0
                m = np.minimum(d, CAP_PX)
                m = np.where(fg & ~own, np.minimum(m, OCCLUDED_PX), m).astype(np.float32)
            maps[c] = m
        return ViewCostMap(vd.cam, maps, {c: vd.an.ridge.get(c, np.zeros((0, 2))) for c in classes})

    def sample(self, cls: str, uv: np.ndarray) -> np.ndarray:
        m = self.maps[cls]
        return ndimage.map_coordinates(m, [uv[:, 1] - 0.5, uv[:, 0] - 0.5], order=1, mode="constant", cval=CAP_PX)


@dataclass(frozen=True)
class Restraint:
    """Chemistry the pictures do not see, as a pull on one atom of the fit: to ``target`` (Å, front frame) when
    ``length`` is 0, else to ``length`` Å from it (a bond to an atom of another residue). Used to keep a residue
    joined to its fitted chain neighbours (the peptide bond C(n−1)–N(n), 1.33 Å)."""

    atom: str
    target: np.ndarray
    length: float = 0.0


RESTRAINT_WEIGHT = 10.0  # a restraint costs (this × its deviation in Å)², like that many px² of squared residual


@dataclass(frozen=True)
class ResidueFit:
    """A fitted residue: atom name -> Å coordinates (front frame), the mean cost per sample (px), the
    camera distance used and the torsion deltas."""

    name: str
    coords: Mapping[str, np.ndarray]
    cost_px: float
    distance: float
    params: np.ndarray


class _Problem:
    """One residue's fit: the articulated model, its stick samples, and every view's cost maps laid out so
    that one call samples all views and classes at once (:meth:`residuals` runs thousands of times per fit:
    finite-difference Jacobians over pose and torsions)."""

    def __init__(self, model: ResidueModel, views: Sequence[ViewCostMap], carbon_class: str, distance: float):
        self.model = model
        self.views = views
        self.D = float(distance)
        self.bi, self.fr, owner = _samples(model)
        cls = np.array([atom_class(model.elements[o], carbon_class) for o in owner])
        self.groups = [(c, np.flatnonzero(cls == c)) for c in np.unique(cls)]
        carbon = np.flatnonzero(cls == carbon_class)
        self.carbon_rows = carbon if len(carbon) else np.arange(len(cls))  # what the reverse term measures to
        self.carbon = carbon_class
        self.centre = model.coords.mean(0)
        self.reverse: list[np.ndarray] = [np.zeros((0, 2)) for _ in views]
        self.free_scale = False
        self.restraints: list[tuple[int, np.ndarray, float]] = []  # (atom index, target Å, length Å)
        # all views' cost maps in one flat array: map (view k, class j) starts at offset[k, j]
        self.order = np.concatenate([rows for _, rows in self.groups])  # samples grouped by class, as output
        sample_class = np.empty(len(cls), int)
        for j, (_, rows) in enumerate(self.groups):
            sample_class[rows] = j
        maps = [[vm.maps[c] for c, _ in self.groups] for vm in views]
        sizes = np.array([[m.size for m in row] for row in maps], int).reshape(len(views), len(self.groups))
        offset = np.concatenate([[0], np.cumsum(sizes.ravel())[:-1]]).reshape(sizes.shape)
        self.flat = np.concatenate([m.ravel() for row in maps for m in row]) if views else np.zeros(0, np.float32)
        self.sample_offset = offset[:, sample_class]  # (views, samples)
        self.h = np.array([vm.maps[self.groups[0][0]].shape[0] for vm in views], float)[:, None]
        self.w = np.array([vm.maps[self.groups[0][0]].shape[1] for vm in views], float)[:, None]

    def distance(self, x: np.ndarray) -> float:
        """The camera distance (Å) of parameters x: :meth:`distances` of one set."""
        return float(self.distances(np.asarray(x, float)[None])[0])

    def atoms(self, x: np.ndarray) -> np.ndarray:
        """Å front-frame coordinates of the model's atoms for parameters x = (rotvec 3, centre Å 3, torsions
        [, log distance ratio when the scale is free])."""
        return self.atoms_many(np.asarray(x, float)[None])[0]

    def distances(self, xs: np.ndarray) -> np.ndarray:
        """Camera distances (Å) of a batch of parameter sets: fixed, or scaled by the last parameter when free."""
        return self.D * np.exp(xs[:, -1]) if self.free_scale else np.full(len(xs), self.D)

    def atoms_many(self, xs: np.ndarray) -> np.ndarray:
        """:meth:`atoms` for a batch of parameter sets (B, n) -> (B, atoms, 3)."""
        nt = len(self.model.torsions)
        X = articulate_many(self.model, xs[:, 6:6 + nt]) - self.centre
        D = self.distances(xs)
        z = np.array([0.0, 0.0, 1.0])
        centre = (xs[:, 3:6] + z * self.D) * (D / self.D)[:, None] - z * D[:, None]  # keeps its normalised place
        return np.einsum("bij,bnj->bni", rotvec_matrices(xs[:, :3]), X) + centre[:, None]

    def points(self, X: np.ndarray) -> np.ndarray:
        """Stick samples of atoms X (..., atoms, 3) -> (..., samples, 3)."""
        a, b = self.model.bonds[self.bi, 0], self.model.bonds[self.bi, 1]
        return X[..., a, :] + (X[..., b, :] - X[..., a, :]) * self.fr[:, None]

    def project(self, P: np.ndarray, vm: ViewCostMap, D: float) -> np.ndarray:
        n = (P + np.array([0.0, 0.0, D])) / D
        return vm.cam.project(n)[0]

    def project_all(self, P: np.ndarray, D: np.ndarray) -> np.ndarray:
        """Pixels (B, views, N, 2) of Å front-frame points P (B, N, 3) at camera distances D (B,) in every view;
        behind a camera -> far off the picture."""
        n = (P + D[:, None, None] * np.array([0.0, 0.0, 1.0])) / D[:, None, None]
        uv = np.stack([vm.cam.project(n)[0] for vm in self.views], axis=1)
        return np.where(np.isfinite(uv), uv, -1e4)

    def sample_all(self, uv: np.ndarray) -> np.ndarray:
        """Cost (..., views, samples) of each stick sample at ``uv`` on its class's map: bilinear, and
        :data:`CAP_PX` off the map, as :meth:`ViewCostMap.sample` (``ndimage.map_coordinates``, order 1, mode
        ``constant``) gives, rounded to the maps' float32 like it, but for all views and classes in one gather."""
        r, c = uv[..., 1] - 0.5, uv[..., 0] - 0.5
        inside = (r >= 0.0) & (r <= self.h - 1.0) & (c >= 0.0) & (c <= self.w - 1.0)
        r0 = np.clip(np.floor(r), 0.0, self.h - 2.0)
        c0 = np.clip(np.floor(c), 0.0, self.w - 2.0)
        fr, fc = r - r0, c - c0
        w = self.w.astype(int)
        base = self.sample_offset + r0.astype(int) * w + c0.astype(int)
        m = self.flat
        val = (m[base] * (1.0 - fc) + m[base + 1] * fc) * (1.0 - fr) + (m[base + w] * (1.0 - fc) + m[base + w + 1] * fc) * fr
        return np.where(inside, val, CAP_PX).astype(np.float32)

    def residuals(self, x: np.ndarray) -> np.ndarray:
        """Per view: every stick sample's cost (grouped by class), then the reverse term (the residue's own carbon
        centre-line pixels to the nearest projected carbon sample, capped, half weight)."""
        return self.residuals_many(np.asarray(x, float)[None])[0]

    def residuals_many(self, xs: np.ndarray) -> np.ndarray:
        """:meth:`residuals` for a batch of parameter sets (B, n) -> (B, m)."""
        uv = self.project_all(self.points(self.atoms_many(xs)), self.distances(xs))
        cost = self.sample_all(uv)[..., self.order]
        out = []
        for k, rev in enumerate(self.reverse):
            out.append(cost[:, k])
            if len(rev):
                out.append(np.minimum(nearest_distances(rev, uv[:, k, self.carbon_rows]), CAP_PX) * 0.5)
        if self.restraints:
            out.append(self.restraint_residuals(xs))
        return np.concatenate(out, axis=1) if out else np.zeros((len(xs), 0))

    def restraint_residuals(self, xs: np.ndarray) -> np.ndarray:
        """(B, m) deviations of the restrained atoms (three per target, one per length), scaled by
        :data:`RESTRAINT_WEIGHT` and stretched so that the fit's soft-L1 loss, 2(√(1 + r²) − 1), costs them
        exactly their square: a restraint pulls harder the further its atom is, where the loss would cap the
        pull of a far-off residual at a few samples' worth."""
        X = self.atoms_many(xs)
        out = []
        for k, target, length in self.restraints:
            d = X[:, k] - target
            out.append(d if length <= 0.0 else np.linalg.norm(d, axis=1, keepdims=True) - length)
        r = RESTRAINT_WEIGHT * np.concatenate(out, axis=1)
        return np.sign(r) * np.sqrt((0.5 * r * r + 1.0) ** 2 - 1.0)

    def image_cost(self, x: np.ndarray) -> float:
        """Mean cost per residual (px) of parameters x in the pictures alone (no restraints), as a fit reports it."""
        kept, self.restraints = self.restraints, []
        try:
            return float(np.mean(np.minimum(np.abs(self.residuals(x)), CAP_PX)))
        finally:
            self.restraints = kept

    def jacobian(self, x: np.ndarray, rel_step: float) -> np.ndarray:
        """The residuals' Jacobian (:func:`forward_jacobian`); the reverse term makes them float64, else float32."""
        wide = any(len(r) for r in self.reverse)
        return forward_jacobian(self.residuals_many, x, rel_step, np.float64 if wide else np.float32)

    def set_reverse(self, x: np.ndarray) -> None:
        """The residue's own carbon centre-line pixels near the model's current projection, per view."""
        P = self.points(self.atoms(x))
        D = self.distance(x)
        for k, vm in enumerate(self.views):
            ridge = vm.ridge.get(self.carbon)
            if ridge is None or not len(ridge):
                self.reverse[k] = np.zeros((0, 2))
                continue
            uv = np.nan_to_num(self.project(P, vm, D), nan=-1e4)
            d, _ = cKDTree(uv).query(ridge)
            self.reverse[k] = ridge[d <= REVERSE_REACH_PX]


def start_from_named(model: ResidueModel, named: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """Initial parameters from atoms already named (≥ 3): each torsion set to the named atoms' dihedral
    where its four atoms are named, then the articulated model superposed on them."""
    common = [k for k, n in enumerate(model.atom_names) if n in named]
    if len(common) < 3:
        return None
    nbr: dict[int, list[int]] = {k: [] for k in range(len(model.atom_names))}
    for a, b in model.bonds:
        nbr[int(a)].append(int(b))
        nbr[int(b)].append(int(a))
    deltas = np.zeros(len(model.torsions))
    for j, (a, b, moved) in enumerate(model.torsions):
        ps = [p for p in nbr[a] if p != b and model.atom_names[p] in named]
        qs = [q for q in nbr[b] if q in moved and model.atom_names[q] in named]
        if not ps or not qs or model.atom_names[a] not in named or model.atom_names[b] not in named:
            continue
        P = [named[model.atom_names[k]] for k in (ps[0], a, b, qs[0])]
        X = articulate(model, deltas)
        deltas[j] = np.radians(dihedral(*P) - dihedral(X[ps[0]], X[a], X[b], X[qs[0]]))
    X = articulate(model, deltas)
    A = X[common] - model.coords.mean(0)
    B = np.array([named[model.atom_names[k]] for k in common], float)
    R, t = kabsch(A, B)
    return np.concatenate([Rotation.from_matrix(R).as_rotvec(), t, deltas])


def _starts_from_cloud(model: ResidueModel, cloud: np.ndarray, n_orient: int = 24, seed: int = 0) -> list[np.ndarray]:
    """Starting poses when no atom is named: random orientations about the residue cloud's centre, with the
    ideal torsions (the torsion flips come after the fit)."""
    rng = np.random.default_rng(seed)
    rots = Rotation.random(n_orient, random_state=rng).as_rotvec()
    c = cloud.mean(0)
    nt = len(model.torsions)
    out = []
    for rv in rots:
        out.append(np.concatenate([rv, c, np.zeros(nt)]))
    return out


def _starts_from_pixels(prob: _Problem, views, carbon_class: str, n_orient: int = 24, seed: int = 0
                        ) -> list[np.ndarray]:
    """Starting poses at the 3D point whose projections best match the centroid of the ``carbon_class``
    pixels in every view (the residue alone in the pictures), in several orientations."""
    cents, cams = [], []
    for vd in views:
        names = list(vd.an.names)
        if carbon_class not in names:
            continue
        ys, xs = np.nonzero(vd.an.pixels.label == names.index(carbon_class))
        if len(xs) < 5:
            continue
        cents.append((xs.mean() + 0.5, ys.mean() + 0.5))
        cams.append(vd.cam)
    if len(cams) < 2:
        return []
    cents = np.array(cents)

    def res(p):
        return np.concatenate([cam.project(p[None])[0][0] - c for cam, c in zip(cams, cents)])

    p = least_squares(res, np.zeros(3)).x
    D = prob.D
    centre = p * D - np.array([0.0, 0.0, D])  # Å, front frame
    rots = Rotation.random(n_orient, random_state=np.random.default_rng(seed)).as_rotvec()
    return [np.concatenate([rv, centre, np.zeros(len(prob.model.torsions))]) for rv in rots]


AT_CANDIDATES = 4096  # poses tried about a residue's known CA (:func:`_starts_at`), scored on the pictures in one batch
AT_STARTS = 8  # ... the best of which are fitted


def _starts_at(prob: _Problem, atom: str, point: np.ndarray, n: int = AT_CANDIDATES, keep: int = AT_STARTS,
               seed: int = 0) -> list[np.ndarray]:
    """Starting poses with the model's ``atom`` on ``point`` (Å, front frame): where a residue's CA is known from its
    label (PyMOL draws it there) but its sticks are not. ``n`` random orientations, each with its torsions turned by
    0 or ±120° at random, are scored on the pictures (and the problem's restraints) in one batch, no fitting, and the
    best ``keep`` returned."""
    k = prob.model.atom_names.index(atom)
    rng = np.random.default_rng(seed)
    rots = Rotation.random(n, random_state=rng)
    nt = len(prob.model.torsions)
    deltas = np.radians(rng.choice([0.0, 120.0, -120.0], size=(n, nt)))
    deltas[0] = 0.0
    X = articulate_many(prob.model, deltas)[:, k] - prob.centre  # the atom in each model's own frame
    xs = np.hstack([rots.as_rotvec(), np.asarray(point, float) - np.einsum("bij,bj->bi", rots.as_matrix(), X), deltas])
    kept, prob.restraints = prob.restraints, []
    try:
        image = np.minimum(np.abs(prob.residuals_many(xs)), CAP_PX)
    finally:
        prob.restraints = kept
    cost = image.mean(axis=1)
    if prob.restraints:  # the restraints as the fit weighs them, per image residual
        cost = cost + (prob.restraint_residuals(xs) ** 2).sum(axis=1) / image.shape[1]
    return [xs[j] for j in np.argsort(cost, kind="stable")[:keep]]


def _fit_3d(prob: _Problem, x0: np.ndarray, cloud: np.ndarray, cloud_cls: np.ndarray, rigid: bool = False,
            max_nfev: int = 200) -> tuple[np.ndarray, float]:
    """Pose (and torsions unless ``rigid``) fitted to the residue's reconstructed centre-line points (3D chamfer)."""
    trees = {c: cKDTree(cloud[cloud_cls == c]) for c in np.unique(cloud_cls)}
    all_tree = cKDTree(cloud)
    nt = len(prob.model.torsions)

    def full(ys):
        return np.hstack([ys, np.repeat(x0[None, 6:], len(ys), axis=0)]) if rigid else ys

    def res_many(ys):
        P = prob.points(prob.atoms_many(full(ys)))  # (B, samples, 3)
        out = []
        for c, rows in prob.groups:
            d = trees.get(c, all_tree).query(P[:, rows].reshape(-1, 3))[0]
            out.append(np.minimum(d, 3.0).reshape(len(ys), -1))
        out.append(np.minimum(nearest_distances(cloud, P), 3.0) * 0.7)  # every cloud point to its nearest sample
        return np.concatenate(out, axis=1)

    y0 = x0[:6] if rigid else x0[:6 + nt]
    r = least_squares(lambda y: res_many(y[None])[0], y0, jac=lambda y: forward_jacobian(res_many, y, None),
                      loss="soft_l1", f_scale=0.5, max_nfev=max_nfev)
    return full(r.x[None])[0], float(np.mean(r.fun ** 2))


def _fit_image(prob: _Problem, x0: np.ndarray) -> tuple[np.ndarray, float]:
    """Pose and torsions (and the distance when the problem's scale is free) fitted to the views."""
    x = x0
    for _ in range(2):  # the reverse term's pixels are chosen near the current pose, then once more
        prob.set_reverse(x)
        r = least_squares(prob.residuals, x, jac=lambda y: prob.jacobian(y, 1e-3), loss="soft_l1", f_scale=1.0,
                          max_nfev=30 * len(x))
        x = r.x
    return x, float(np.mean(np.minimum(np.abs(r.fun), CAP_PX)))


GOOD_FIT_PX = 0.8  # mean cost per sample below which a fit from the named atoms is kept without other starts
SEARCH_MARGIN_PX = 0.05  # a searched start replaces the named atoms' fit only when it fits better by more than this


def fit_residue(views, name: str, carbon_class: str, distance: float, *,
                named: Mapping[str, np.ndarray] | None = None, cloud: np.ndarray | None = None,
                cloud_classes: np.ndarray | None = None, terminal: bool = False,
                free_scale: bool = False, alone: bool = False, search: bool = True,
                flips: bool = True, restraints: Sequence[Restraint] = (),
                at: tuple[str, np.ndarray] | None = None, turns: bool = True) -> ResidueFit | None:
    """Fit residue ``name`` (drawn with carbons of ``carbon_class``) to the views (the reconstruction's
    :class:`~misi_agent.tools.reconstruction.ViewData`), at camera distance ``distance`` Å.

    ``named`` (atom name -> Å) starts the fit from atoms identity already named; when that fit is
    poor or there is none, ``cloud`` (the residue's reconstructed centre-line points, Å, and their
    classes) seeds 3D fits from several orientations, the best few refined on the images. With
    ``free_scale`` the camera distance is fitted last (the model's size in Å is known), and
    returned in the fit. ``alone`` says the residue is the only one drawn (the residue–ligand
    pictures): when the other starts fit poorly, its carbon pixels' centroids, triangulated over the
    views, seed fits from several orientations directly on the images. None when the residue has no
    template or nothing to start from. ``search=False`` keeps to the start from the named atoms (and
    the torsion flips): for many residues at once. ``flips=False`` leaves out the torsion flips too (a
    quick fit, to compare starts; about a tenth of the time). ``restraints`` pull atoms towards places
    the chemistry says (:class:`Restraint`); the cost reported is then still the pictures' alone.
    ``at`` (atom name, Å): where that atom is known to lie (a residue label drawn at its CA and triangulated);
    when the other starts fit poorly, fits started there in several orientations are tried too (pass a
    :class:`Restraint` on the atom to keep it there). ``turns=False`` leaves out the poor fit's turns about its
    side chain (each refitted with torsion flips, most of a searched fit's time).
    """
    model = residue_model(name, terminal)
    if model is None:
        return None
    classes = sorted({atom_class(e, carbon_class) for e in model.elements})
    vms = [ViewCostMap.of(vd, classes) for vd in views]
    prob = _Problem(model, vms, carbon_class, distance)
    prob.restraints = [(model.atom_names.index(r.atom), np.asarray(r.target, float), float(r.length))
                       for r in restraints if r.atom in model.atom_names]
    x_named = start_from_named(model, named) if named else None
    from_named = _fit_image(prob, x_named) if x_named is not None else None
    best = from_named
    if search and (best is None or best[1] > GOOD_FIT_PX) and cloud is not None and len(cloud) >= 4 and cloud_classes is not None:
        starts = _starts_from_cloud(model, cloud)
        rigid = sorted((_fit_3d(prob, x, cloud, cloud_classes, rigid=True, max_nfev=40) for x in starts),
                       key=lambda t: t[1])[:6]
        full = sorted((_fit_3d(prob, x, cloud, cloud_classes) for x, _ in rigid), key=lambda t: t[1])[:3]
        for x, _ in full:
            best = _better(best, _fit_image(prob, x), best is from_named)
    if search and (best is None or best[1] > GOOD_FIT_PX) and alone:
        for x in _starts_from_pixels(prob, views, carbon_class):
            best = _better(best, _fit_image(prob, x), best is from_named)
    if search and (best is None or best[1] > GOOD_FIT_PX) and at is not None and at[0] in model.atom_names:
        for x in _starts_at(prob, at[0], at[1]):
            best = _better(best, _fit_image(prob, x), best is from_named)
    if best is None:
        return None
    x, cost = _flip_torsions(prob, *best) if flips else best
    if search and turns and cost > GOOD_FIT_PX:
        for y in _turned_about_side_chain(prob, x):
            cand = _flip_torsions(prob, *_fit_image(prob, y))
            if cand[1] < cost:
                x, cost = cand
    D = float(distance)
    if free_scale:
        prob.free_scale = True
        x, cost = _fit_image(prob, np.concatenate([x, [0.0]]))
        D = prob.distance(x)
    if prob.restraints:  # what the pictures say of the pose, as an unrestrained fit reports it
        cost = prob.image_cost(x)
    X = prob.atoms(x)
    return ResidueFit(name, iupac_coords(name, {n: X[k] for k, n in enumerate(model.atom_names)}), cost, D, x)


def _better(best: tuple[np.ndarray, float] | None, cand: tuple[np.ndarray, float], named: bool
            ) -> tuple[np.ndarray, float]:
    """The better of two fits (parameters, cost). When ``best`` is the fit from the named atoms, a searched one must
    beat it by :data:`SEARCH_MARGIN_PX`: costs that close say the pictures cannot tell the two apart, and the
    named atoms are evidence the cost does not see (6yqw's Phe 44 fits 0.812 px from its atoms, O 0.22 Å off,
    and 0.806 px turned over, O 1.26 Å off). Which of such a pair wins would otherwise depend on the machine's
    floating-point rounding."""
    if best is None:
        return cand
    margin = SEARCH_MARGIN_PX if named else 0.0
    return cand if cand[1] < best[1] - margin else best


def _turned_about_side_chain(prob: _Problem, x: np.ndarray) -> list[np.ndarray]:
    """The pose turned by ±120° about the CA→CB axis (the backbone's N, C, O put where the others were):
    a residue seen mostly along its side chain can be fitted with its backbone turned the wrong way."""
    names = prob.model.atom_names
    if "CA" not in names or "CB" not in names:
        return []
    X = prob.atoms(x)
    ca, cb = X[names.index("CA")], X[names.index("CB")]
    axis = (cb - ca) / np.linalg.norm(cb - ca)
    out = []
    R0 = Rotation.from_rotvec(x[:3])
    for a in (2.0 * np.pi / 3.0, -2.0 * np.pi / 3.0):
        T = Rotation.from_rotvec(axis * a)
        y = x.copy()
        y[:3] = (T * R0).as_rotvec()
        centre = X.mean(0)  # the model centre turns about CA too
        D = prob.distance(x)
        z = np.array([0.0, 0.0, 1.0])
        new_c = T.apply(centre - ca) + ca
        # invert atoms(): centre = (x[3:6] + z D0) (D / D0) - z D
        y[3:6] = (new_c + z * D) * (prob.D / D) - z * prob.D
        out.append(y)
    return out


FLIPS = (2.0 * np.pi / 3.0, -2.0 * np.pi / 3.0, np.pi)
FLIP_MARGIN_PX = 0.005  # a flipped torsion is kept when its refit costs the views this much less (was 0.02: Phe 44 of
# 6YQW's raster pocket, whose true pose costs 0.022 px less than one with its O 2 A off, kept the wrong one on some CPUs)


def _flip_torsions(prob: _Problem, x: np.ndarray, cost: float, rounds: int = 2) -> tuple[np.ndarray, float]:
    """Try each torsion turned to its other staggered places (and by 180°), refitting each, while the image
    cost improves: a branch fitted the wrong way round (Thr OG1/CG2, Asn OD1/ND2, Ile CD1) shows in its
    colours, but the least-squares fit cannot walk over the barrier between the two."""
    for _ in range(rounds):
        improved = False
        for k in range(len(prob.model.torsions)):
            for d in FLIPS:
                y = x.copy()
                y[6 + k] += d
                cand = _fit_image(prob, y)
                if cand[1] < cost - FLIP_MARGIN_PX:
                    x, cost, improved = cand[0], cand[1], True
        if not improved:
            break
    return x, cost


def iupac_coords(name: str, coords: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Fitted coordinates renamed where the picture cannot tell two atoms apart (Arg NH1/NH2, Asp
    OD1/OD2, Leu CD1/CD2, ...): the IUPAC conventions of :func:`misi_agent.tools.identity.iupac_names`."""
    from misi_agent.tools.identity import iupac_names

    names = list(coords)
    X = np.array([coords[n] for n in names])
    renamed = iupac_names(name, dict(enumerate(names)), X)
    return {renamed[k]: X[k] for k in range(len(names))}


DEFAULT_CARBON = "POCKET_C0"  # the carbon class assumed for a residue when the pictures show no pocket carbon


def _members(rec, group: int | None) -> np.ndarray:
    """Indices of the group's atoms (every non-ligand atom when ``group`` is None)."""
    return (np.flatnonzero(np.asarray(rec.residue) == group) if group is not None
            else np.flatnonzero(~np.asarray(rec.is_ligand, bool)))


def residue_carbon_class(rec, group: int | None = None) -> str | None:
    """The pocket carbon colour class the residue is drawn in: the commonest among its atoms (among all the
    reconstruction's centre-line points when its atoms have none); None when the pictures show no pocket carbon."""
    from misi_agent.tools.atom_detection import POCKET_CLASSES

    carbon_classes = [str(c) for c in np.asarray(rec.classes)[_members(rec, group)] if str(c) in POCKET_CLASSES]
    if not carbon_classes:
        carbon_classes = [str(c) for c in np.asarray(rec.cloud_classes) if str(c) in POCKET_CLASSES]
    return max(sorted(set(carbon_classes)), key=carbon_classes.count) if carbon_classes else None


def residue_cloud(rec, group: int | None = None, ligand_gap_a: float = 1.0, reach_a: float = 2.0
                  ) -> tuple[np.ndarray, np.ndarray, str]:
    """The reconstruction's centre-line points of one pocket residue (all pocket points when ``group``
    is None), their classes and the residue's drawn carbon class: pocket-carbon points (of the group's
    colour) and the other non-ligand points within ``reach_a`` of them, away from the ligand's atoms."""
    from misi_agent.tools.atom_detection import POCKET_CLASSES

    cl, cc = np.asarray(rec.cloud, float), np.asarray(rec.cloud_classes)
    coords = np.asarray(rec.coords, float)
    lig = coords[np.asarray(rec.is_ligand, bool)]
    members = _members(rec, group)
    carbon = residue_carbon_class(rec, group)
    if carbon is None:
        return np.zeros((0, 3)), np.zeros(0, dtype="<U9"), DEFAULT_CARBON
    if not len(cl):
        return np.zeros((0, 3)), np.zeros(0, dtype="<U9"), carbon
    keep = np.ones(len(cl), bool)
    if len(lig):
        keep &= cKDTree(lig).query(cl)[0] > ligand_gap_a
    carb = cc == carbon
    if group is not None:  # the group's own carbons: near its reconstructed atoms
        keep_c = cKDTree(coords[members]).query(cl)[0] < 1.0
        carb &= keep_c
    if not carb.any():
        return np.zeros((0, 3)), np.zeros(0, dtype="<U9"), carbon
    near = cKDTree(cl[carb]).query(cl)[0] < reach_a
    sel = keep & (carb | (near & ~np.isin(cc, list(POCKET_CLASSES))))
    return cl[sel], cc[sel], carbon
