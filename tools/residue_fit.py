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
in perspective fixes it (:func:`fit_scale`).
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
    X = model.coords.copy()
    for (a, b, moved), th in zip(model.torsions, torsion_deltas):
        if not moved or th == 0.0:
            continue
        axis = X[b] - X[a]
        axis /= np.linalg.norm(axis)
        R = Rotation.from_rotvec(axis * th).as_matrix()
        m = list(moved)
        X[m] = (X[m] - X[b]) @ R.T + X[b]
    return X


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
class ResidueFit:
    """A fitted residue: atom name -> Å coordinates (front frame), the mean cost per sample (px), the
    camera distance used and the torsion deltas."""

    name: str
    coords: Mapping[str, np.ndarray]
    cost_px: float
    distance: float
    params: np.ndarray


class _Problem:
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

    def distance(self, x: np.ndarray) -> float:
        return self.D * float(np.exp(x[-1])) if self.free_scale else self.D

    def atoms(self, x: np.ndarray) -> np.ndarray:
        """Å front-frame coordinates of the model's atoms for parameters x = (rotvec 3, centre Å 3, torsions
        [, log distance ratio when the scale is free])."""
        nt = len(self.model.torsions)
        X = articulate(self.model, x[6:6 + nt]) - self.centre
        D = self.distance(x)
        z = np.array([0.0, 0.0, 1.0])
        centre = (x[3:6] + z * self.D) * (D / self.D) - z * D  # the centre keeps its normalised place
        return X @ Rotation.from_rotvec(x[:3]).as_matrix().T + centre

    def points(self, X: np.ndarray) -> np.ndarray:
        a, b = self.model.bonds[self.bi, 0], self.model.bonds[self.bi, 1]
        return X[a] + (X[b] - X[a]) * self.fr[:, None]

    def project(self, P: np.ndarray, vm: ViewCostMap, D: float) -> np.ndarray:
        n = (P + np.array([0.0, 0.0, D])) / D
        return vm.cam.project(n)[0]

    def residuals(self, x: np.ndarray) -> np.ndarray:
        D = self.distance(x)
        P = self.points(self.atoms(x))
        out = []
        for vm, rev in zip(self.views, self.reverse):
            uv = self.project(P, vm, D)
            uv = np.nan_to_num(uv, nan=-1e4)
            for c, rows in self.groups:
                out.append(vm.sample(c, uv[rows]))
            if len(rev):
                d, _ = cKDTree(uv[self.carbon_rows]).query(rev)
                out.append(np.minimum(d, CAP_PX) * 0.5)
        return np.concatenate(out)

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


def _fit_3d(prob: _Problem, x0: np.ndarray, cloud: np.ndarray, cloud_cls: np.ndarray, rigid: bool = False,
            max_nfev: int = 200) -> tuple[np.ndarray, float]:
    """Pose (and torsions unless ``rigid``) fitted to the residue's reconstructed centre-line points (3D chamfer)."""
    trees = {c: cKDTree(cloud[cloud_cls == c]) for c in np.unique(cloud_cls)}
    all_tree = cKDTree(cloud)
    nt = len(prob.model.torsions)

    def full(y):
        return np.concatenate([y, x0[6:]]) if rigid else y

    def res(y):
        P = prob.points(prob.atoms(full(y)))
        out = []
        for c, rows in prob.groups:
            t = trees.get(c, all_tree)
            out.append(np.minimum(t.query(P[rows])[0], 3.0))
        d, _ = cKDTree(P).query(cloud)
        out.append(np.minimum(d, 3.0) * 0.7)
        return np.concatenate(out)

    y0 = x0[:6] if rigid else x0[:6 + nt]
    r = least_squares(res, y0, loss="soft_l1", f_scale=0.5, max_nfev=max_nfev)
    return full(r.x), float(np.mean(r.fun ** 2))


def _fit_image(prob: _Problem, x0: np.ndarray) -> tuple[np.ndarray, float]:
    """Pose and torsions (and the distance when the problem's scale is free) fitted to the views."""
    x = x0
    for _ in range(2):  # the reverse term's pixels are chosen near the current pose, then once more
        prob.set_reverse(x)
        r = least_squares(prob.residuals, x, loss="soft_l1", f_scale=1.0, max_nfev=30 * len(x), diff_step=1e-3)
        x = r.x
    return x, float(np.mean(np.minimum(np.abs(r.fun), CAP_PX)))


GOOD_FIT_PX = 0.8  # mean cost per sample below which a fit from the named atoms is kept without other starts


def fit_residue(views, name: str, carbon_class: str, distance: float, *,
                named: Mapping[str, np.ndarray] | None = None, cloud: np.ndarray | None = None,
                cloud_classes: np.ndarray | None = None, terminal: bool = False,
                free_scale: bool = False, alone: bool = False, search: bool = True,
                flips: bool = True) -> ResidueFit | None:
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
    quick fit, to compare starts; about a tenth of the time).
    """
    model = residue_model(name, terminal)
    if model is None:
        return None
    classes = sorted({atom_class(e, carbon_class) for e in model.elements})
    vms = [ViewCostMap.of(vd, classes) for vd in views]
    prob = _Problem(model, vms, carbon_class, distance)
    best = None
    x_named = start_from_named(model, named) if named else None
    if x_named is not None:
        best = _fit_image(prob, x_named)
    if search and (best is None or best[1] > GOOD_FIT_PX) and cloud is not None and len(cloud) >= 4 and cloud_classes is not None:
        starts = _starts_from_cloud(model, cloud)
        rigid = sorted((_fit_3d(prob, x, cloud, cloud_classes, rigid=True, max_nfev=40) for x in starts),
                       key=lambda t: t[1])[:6]
        full = sorted((_fit_3d(prob, x, cloud, cloud_classes) for x, _ in rigid), key=lambda t: t[1])[:3]
        for x, _ in full:
            cand = _fit_image(prob, x)
            if best is None or cand[1] < best[1]:
                best = cand
    if search and (best is None or best[1] > GOOD_FIT_PX) and alone:
        for x in _starts_from_pixels(prob, views, carbon_class):
            cand = _fit_image(prob, x)
            if best is None or cand[1] < best[1]:
                best = cand
    if best is None:
        return None
    x, cost = _flip_torsions(prob, *best) if flips else best
    if search and cost > GOOD_FIT_PX:
        for y in _turned_about_side_chain(prob, x):
            cand = _flip_torsions(prob, *_fit_image(prob, y))
            if cand[1] < cost:
                x, cost = cand
    D = float(distance)
    if free_scale:
        prob.free_scale = True
        x, cost = _fit_image(prob, np.concatenate([x, [0.0]]))
        D = prob.distance(x)
    X = prob.atoms(x)
    return ResidueFit(name, iupac_coords(name, {n: X[k] for k, n in enumerate(model.atom_names)}), cost, D, x)


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
                if cand[1] < cost - 0.02:
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
    return max(set(carbon_classes), key=carbon_classes.count) if carbon_classes else None


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
