"""Who is who in a reconstructed complex: residue names, numbers and atom names, ligand atom names and bonds.

The pictures carry identity in two forms: text labels (read by :mod:`misi_agent.tools.label_reading`,
which makes mistakes) and chemistry (colours give elements, the reconstruction gives the heavy-atom
graph). This module lets each check and repair the other:

* **Residue atoms** are named by matching the residue's reconstructed heavy-atom graph (elements from
  the colour classes, bonds from the reconstruction) to the wwPDB CCD template of a residue name
  (networkx monomorphism: a template atom may be missing, never an extra one). The template that
  fits decides the residue name when OCR and graph disagree; OCR decides between templates the
  graph cannot tell apart.
* **Residue numbers** come from the ``ARG 45`` labels, each anchored at its residue's CA: in every
  view a label gives evidence to the residues near it (weights falling with the distance to its
  box, or to its centre at the picture's measured label offset, :func:`label_placement`), the six
  views add up, and one global assignment gives each label text to one residue, a text whose
  residue name the residue's graph cannot be counting for little. Residues joined by a peptide
  bond (C–N ≈ 1.33 Å) have consecutive numbers, which fills in or corrects numbers OCR missed.
  A label text read in two or more views is first triangulated to one 3D point
  (:func:`label_anchors_3d`) and judged by how near that point lies to each residue group: in a
  crowded pocket a label drawn beside its CA is often nearer a neighbour in any one view, but the
  views disagree about which neighbour (raster T9 pictures, groups within 4 Å of the ligand: the
  right label on 38 % of them by per-view votes, 68 % with the triangulated labels). A text drawn at two
  places in one view (two copies of a chain around the ligand: chains are not drawn) names two
  residues (:func:`label_copies`) and is judged by its per-view votes, as one triangulated point would
  fall between the two (1hpx, the HIV protease dimer, exact atoms: 53 → 74 of 79 residues named right).
  The chain checks the assignment across residues (:func:`threaded_assignment`): groups that follow each other
  in the chain are bonded, so two groups within a bond of each other earn a bonus for taking consecutive
  numbers, and a run of labels lands on a run of linked groups where label places alone would shift it by one
  (captured raster T9 inputs, groups within 4 Å of the ligand named right: 208 → 222 of 256 test items' groups,
  77 → 85 of 100 cofactor groups, 207 → 225 of 272 on the held-out pool).
* **Ligand atom names** come from the name labels placed next to each ligand atom: each label is
  read again under the constraint that the name starts with the nearby atom's element (colour),
  gives evidence to the atoms near it in the same way, the views add up, and one assignment makes
  names unique; sugar primes lost by small text are restored in nucleotides.
* **Ligand bonds and bond orders** are perceived with RDKit from the reconstructed coordinates and
  elements (:func:`ligand_molecule`): hydrogens from each atom's geometry (hybridisation from bond
  angles and planarity), double bonds by a maximum matching over the atoms short of valence (the
  Kekulé structure), leftover deficits as charges.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import combinations, permutations
from typing import Any, Collection, Mapping, Sequence

import networkx as nx
import numpy as np
from rdkit import Chem
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from misi_agent.knowledge import STANDARD_RESIDUES
from misi_agent.tools.geometry import angle, dihedral, kabsch
from misi_agent.tools.label_reading import ImageLabels, LabelRead, atom_name_reading, residue_reading

PEPTIDE_CN = (1.1, 1.65)  # Å: a C–N distance in this range between two residues is a peptide bond
BOND_MAX = 1.95  # Å: heavy atoms closer than this are bonded when the reconstruction gives no bonds
CROWDED_WEIGHT = 0.05  # evidence from a label that likely overlaps a neighbour's counts this much
LABEL_GATE_HEIGHTS = 6.0  # a label farther than this many text heights from an atom does not vote for it
LABEL_3D_SIGMA_A = 2.5  # Å: how far a residue label triangulated over the views lands from its residue (measured median)
LABEL_3D_MAX_A = 6.0  # Å: a triangulated label this far from every atom of a group does not name it
SHORT_NUMBER_MIN_VIEWS = 3  # a residue text with a one-digit number read in fewer views is a label cut short
SAME_LABEL_A = 3.5  # Å: two texts of one residue name triangulated this close, never read in one view, are one label
LABEL_3D_WEIGHT = 10.0  # evidence of a triangulated label against the per-view votes (it outranks them)
FRAGMENT_GAP_A = 4.0  # Å: an unlabelled group this close to a labelled one of its colour may be a piece of that residue
BOND_REACH_A = 1.55  # Å: the longest heavy-atom bond in a residue (C-S 1.8 aside); k bonds span at most k times this
MISFIT_WEIGHT = 0.3  # a label whose residue cannot hold the group's N, O and S (one stray N/O allowed) counts this much
CHAIN_LINK_A = 2.2  # Å: two rebuilt groups whose nearest atoms are this close are covalent neighbours in the chain
# (raster T9 captures: 297 of 442 pairs of sequence neighbours, 10 of 24,488 other pairs)
CHAIN_BONUS = 5.0  # evidence two linked groups earn for taking consecutive residue numbers (half a triangulated label)
CLASS_ELEMENT = {"O": "O", "N": "N", "LIGAND_C": "C", "POCKET_C0": "C", "POCKET_C1": "C", "S": "S", "P": "P",
                 "F": "F", "CL": "Cl", "BR": "Br", "I": "I", "B": "B", "SE": "Se", "FE": "Fe", "ZN": "Zn", "MG": "Mg"}


def element_of_class(cls: str) -> str:
    """Element symbol (RDKit spelling) of a colour class; unknown classes are carbon's foes: ``X``."""
    return CLASS_ELEMENT.get(str(cls), "X")


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class ResidueIdentity:
    """One pocket residue group: name, number, atom names and how they were decided."""

    group: int
    atoms: tuple[int, ...]  # reconstruction indices
    name: str
    number: int | None
    ins_code: str
    atom_names: Mapping[int, str]  # reconstruction index -> template atom name
    graph_fit: float  # share of the template's heavy atoms matched (1.0: complete)
    name_source: str  # "ocr+graph", "graph", "ocr", "none"
    number_source: str  # "ocr", "peptide", "none"; "label": read at its CA where no label was read (image_hbonds)
    ocr_votes: Mapping[str, float] = field(default_factory=dict)
    completed: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)  # template atoms placed

    @property
    def label(self) -> str:
        return f"{self.name} {self.number}{self.ins_code}" if self.number is not None else f"{self.name} ?"

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "label": self.label, "n_atoms": len(self.atoms), "graph_fit": round(self.graph_fit, 3),
                "name_source": self.name_source, "number_source": self.number_source,
                "ocr_votes": {k: round(v, 2) for k, v in sorted(self.ocr_votes.items(), key=lambda kv: -kv[1])[:3]}}


@dataclass(frozen=True)
class LigandIdentity:
    """Ligand atom names (reconstruction index -> name) and each name's vote share."""

    names: Mapping[int, str]
    support: Mapping[int, float]
    n_labels_read: int

    def to_dict(self) -> dict[str, Any]:
        return {"n_named": sum(1 for v in self.names.values() if not v.startswith("?")),
                "n_atoms": len(self.names), "n_labels_read": self.n_labels_read}


# ----------------------------------------------------------------------------- graphs


def recon_bonds(coords: np.ndarray, bonds: np.ndarray | None, idx: Sequence[int]) -> list[tuple[int, int]]:
    """Bonds among ``idx``: the reconstruction's own when it has any there, else by distance (< BOND_MAX Å)."""
    sel = set(int(i) for i in idx)
    out = []
    if bonds is not None and len(bonds):
        out = [(int(a), int(b)) for a, b in np.asarray(bonds, int).reshape(-1, 2) if int(a) in sel and int(b) in sel]
    if not out:
        ids = list(sel)
        P = np.asarray(coords, float)[ids]
        d = np.linalg.norm(P[:, None] - P[None], axis=2)
        for i in range(len(ids)):
            for j in range(i + 1, len(ids)):
                if 0.9 < d[i, j] < BOND_MAX:
                    out.append((ids[i], ids[j]))
    return out


@lru_cache(maxsize=64)
def template_graph(name: str) -> nx.Graph | None:
    """Heavy-atom graph of a residue's CCD template (hydrogens left out; OXT kept, a C-terminal residue
    shows it), nodes = atom names."""
    from misi_agent.structure import ccd_template

    t = ccd_template(name)
    if t is None or t.bonds is None:
        return None
    g = nx.Graph()
    names = [str(n) for n in t.atom_name]
    for n, el in zip(names, t.element):
        g.add_node(n, element=str(el).capitalize())
    for a, b, _ in t.bonds.as_array():
        if names[a] in g and names[b] in g:
            g.add_edge(names[a], names[b])
    return g


@lru_cache(maxsize=64)
def _numbered_template(name: str) -> tuple[tuple[str, ...], nx.Graph] | None:
    """(atom names, :func:`template_graph` with the atoms numbered in that order) for the graph matcher, which walks
    sets of nodes: with atom names as nodes its order (which mappings come first, which 48 are kept, which of two
    equal ones wins) would follow Python's string hashing, different in every process; integers keep it the same."""
    tg = template_graph(name)
    return None if tg is None else (tuple(tg.nodes), nx.convert_node_labels_to_integers(tg, ordering="default"))


@lru_cache(maxsize=64)
def _ideal_lengths(name: str) -> dict[frozenset, float]:
    from misi_agent.structure import ccd_template

    t = ccd_template(name)
    if t is None or t.bonds is None:
        return {}
    names = [str(n) for n in t.atom_name]
    return {frozenset((names[a], names[b])): float(np.linalg.norm(t.coord[a] - t.coord[b]))
            for a, b, _ in t.bonds.as_array()}


def template_mappings(rg: nx.Graph, name: str, coords: np.ndarray | None = None,
                      context: tuple[np.ndarray, np.ndarray] | None = None, limit: int = 48) -> list[dict[int, str]]:
    """Every way (up to ``limit``) of naming the reconstructed residue graph ``rg`` from template ``name``:
    monomorphisms of ``rg`` into the template preserving elements (missing template atoms allowed),
    likeliest first.

    Several mappings fit when the graph is short (a Lys side-chain tip N–C–C reads as its backbone
    N–CA–C; a Ser C–O as C=O or CB–OG). They are ranked by L-amino-acid chirality at CA, then by how
    close their bond lengths are to the template's ideal ones, a backbone C or N that makes a peptide
    bond to another residue (``context``: coordinates of the other residues' N and C atoms) counting
    in its favour. The ranking is a guess where the graph is this ambiguous; the images decide
    between the candidates (:func:`misi_agent.tools.image_hbonds._fitted_pocket`).
    """
    numbered = _numbered_template(name)
    if numbered is None or rg.number_of_nodes() == 0 or rg.number_of_nodes() > numbered[1].number_of_nodes():
        return []
    names, itg = numbered
    gm = nx.algorithms.isomorphism.GraphMatcher(itg, rg, node_match=lambda a, b: a["element"] == b["element"])
    maps = []
    for k, m in enumerate(gm.subgraph_monomorphisms_iter()):
        maps.append({r: names[t] for t, r in m.items()})
        if k >= limit - 1:
            break
    if len(maps) > 1:
        # mappings that differ only by symmetric atoms score alike; keep the first of equals (stable); where the bond
        # lengths do not decide (no coordinates given, or equal scores) a lone carbonyl O is named O before OXT (one
        # residue of a chain is C-terminal)
        maps.sort(key=lambda mp: (round(mapping_score(rg, name, mp, coords, context), 6) if coords is not None else 0.0,
                                  "OXT" in mp.values() and "O" not in mp.values()))
    return maps


def mapping_score(rg: nx.Graph, name: str, mp: Mapping[int, str], coords: np.ndarray,
                  context: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """How unlikely a naming ``mp`` of graph ``rg`` is (lower is likelier): the summed deviation (Å) of its bond
    lengths from the template's ideal ones, 2 for D chirality at CA, less 1 for each backbone C or N that
    makes a peptide bond to another residue (``context``: the other residues' N and C coordinates)."""
    ideal = _ideal_lengths(name)
    s = 0.0
    for a, b in rg.edges():
        L = ideal.get(frozenset((mp[a], mp[b])))
        if L is not None:
            s += abs(float(np.linalg.norm(coords[a] - coords[b])) - L)
    inv = {v: k for k, v in mp.items()}
    if all(x in inv for x in ("N", "CA", "C", "CB")):  # L-amino acid: (N-CA).((C-CA)x(CB-CA)) > 0
        ca = coords[inv["CA"]]
        vol = float(np.dot(coords[inv["N"]] - ca, np.cross(coords[inv["C"]] - ca, coords[inv["CB"]] - ca)))
        s += 2.0 if vol < 0 else 0.0
    if context is not None:
        other_n, other_c = context
        if "C" in inv and len(other_n):
            s -= 1.0 * bool((np.linalg.norm(other_n - coords[inv["C"]], axis=1) < PEPTIDE_CN[1]).any())
        if "N" in inv and len(other_c):
            s -= 1.0 * bool((np.linalg.norm(other_c - coords[inv["N"]], axis=1) < PEPTIDE_CN[1]).any())
    return s


def match_template(rg: nx.Graph, name: str, coords: np.ndarray | None = None,
                   context: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[dict[int, str] | None, float]:
    """Atom names for the reconstructed residue graph ``rg`` from template ``name``: the likeliest of
    :func:`template_mappings`. Returns (index -> atom name, share of template atoms matched), or (None, 0)."""
    maps = template_mappings(rg, name, coords, context)
    return (maps[0], _template_share(name, maps[0])) if maps else (None, 0.0)


def _template_share(name: str, mp: Mapping[int, str]) -> float:
    """Share of the template's heavy atoms (OXT aside) that the naming ``mp`` matched."""
    n_core = sum(1 for n in template_graph(name).nodes if n != "OXT")
    return sum(1 for v in mp.values() if v != "OXT") / n_core


def _largest_part_mappings(rg: nx.Graph, name: str, coords: np.ndarray | None = None,
                           context: tuple[np.ndarray, np.ndarray] | None = None) -> list[dict[int, str]]:
    """:func:`template_mappings` of the largest connected part of ``rg`` that fits the template (for a group
    whose whole graph fits no naming); empty when no part fits."""
    for comp in sorted(nx.connected_components(rg), key=len, reverse=True):
        maps = template_mappings(rg.subgraph(comp).copy(), name, coords, context)
        if maps:
            return maps
    return []


def peptide_context(rec, idx: Collection[int]) -> tuple[np.ndarray, np.ndarray]:
    """The N and pocket-carbon coordinates of every residue group but the atoms ``idx``: where a peptide
    bond to another residue can be (:func:`mapping_score`'s ``context``)."""
    classes = [str(c) for c in rec.classes]
    coords = np.asarray(rec.coords, float)
    mine = set(int(i) for i in idx)
    on = [i for i in range(len(classes)) if classes[i] == "N" and rec.residue[i] >= 0 and i not in mine]
    oc = [i for i in range(len(classes)) if classes[i].startswith("POCKET_C") and i not in mine]
    return coords[on].reshape(-1, 3), coords[oc].reshape(-1, 3)


MAX_STRAYS = 2  # N/O atoms of other residues a group may hold (left out in turn to name the rest)


def polar_alternatives(rec, res: "ResidueIdentity", max_n: int = 4,
                       focus: Collection[int] | None = None) -> list[dict[int, str]]:
    """Namings of ``res``'s reconstructed atoms from its template that differ in what they call its N/O
    atoms (the ones an H-bond list names; with ``focus``, only those of its N/O atoms in ``focus``: the ones
    near the ligand), likeliest first, the current naming first; at most ``max_n``.

    The same graph search as :func:`identify_residues` (the whole group, else its largest connected
    part that fits), keeping the runners-up instead of only the best.
    """
    coords = np.asarray(rec.coords, float)
    classes = [str(c) for c in rec.classes]
    idx = list(res.atoms)
    rg = residue_graph(coords, classes, rec.bonds, idx)
    polar = [i for i in idx if element_of_class(classes[i]) in ("N", "O")]
    key_atoms = [i for i in polar if focus is None or i in focus]
    ctx = peptide_context(rec, idx)
    maps = template_mappings(rg, res.name, coords, ctx)
    for k in range(1, MAX_STRAYS + 1):  # a group holds a neighbour's N or O (same colour): leave strays out
        if maps:
            break
        found = []
        for drop in combinations(polar, k):
            sub = rg.subgraph(set(idx) - set(drop)).copy()
            found += [(mapping_score(sub, res.name, m, coords, ctx), n, m)
                      for n, m in enumerate(template_mappings(sub, res.name, coords, ctx, limit=8))]
        maps = [m for _, _, m in sorted(found, key=lambda t: (round(t[0], 6), t[1]))]
    maps = maps or _largest_part_mappings(rg, res.name, coords, ctx)
    maps = [m for m in maps if "OXT" not in m.values()] or maps  # pocket residues are seldom C-terminal
    out, seen = [], set()
    for mp in [dict(res.atom_names)] + [iupac_names(res.name, m, coords) for m in maps]:
        key = tuple(sorted((i, mp.get(i, "")) for i in key_atoms))
        if key in seen or not mp:
            continue
        seen.add(key)
        out.append(mp)
        if len(out) >= max_n:
            break
    return out


SYMMETRIC_PAIRS = {  # residue: (pair, torsion reference atoms a-b-c for the first atom of the pair, rule)
    "ARG": (("NH1", "NH2"), ("CD", "NE", "CZ"), "cis"),   # NH1 cis to CD
    "ASP": (("OD1", "OD2"), ("CA", "CB", "CG"), "chi90"),  # |chi2(CA-CB-CG-OD1)| <= 90
    "GLU": (("OE1", "OE2"), ("CB", "CG", "CD"), "chi90"),  # |chi3(CB-CG-CD-OE1)| <= 90
    "PHE": (("CD1", "CD2"), ("CA", "CB", "CG"), "chi90"),
    "TYR": (("CD1", "CD2"), ("CA", "CB", "CG"), "chi90"),
}


def complete_residue(name: str, atom_names: Mapping[int, str], coords: np.ndarray) -> dict[str, tuple[float, float, float]]:
    """Template atoms missing next to matched ones, placed by superposing the CCD ideal residue on the
    matched atoms (Kabsch, at least three). The H-bond engine skips an atom whose template neighbour
    is missing (a truncated side chain); a reconstruction that lost one carbon should not cost the
    polar atom beside it."""
    from misi_agent.structure import ccd_template

    t = ccd_template(name)
    tg = template_graph(name)
    if t is None or tg is None or len(atom_names) < 3:
        return {}
    tnames = [str(n) for n in t.atom_name]
    have = {n: i for i, n in atom_names.items()}
    missing = {nb for n in have if n in tg for nb in tg.neighbors(n) if nb not in have and nb != "OXT"}
    if not missing:
        return {}
    common = [n for n in have if n in tnames]
    if len(common) < 3:
        return {}
    A = np.array([t.coord[tnames.index(n)] for n in common], float)
    B = np.array([coords[have[n]] for n in common], float)
    R, shift = kabsch(A, B)
    return {n: tuple(map(float, R @ t.coord[tnames.index(n)] + shift)) for n in sorted(missing) if n in tnames}


def iupac_names(name: str, atom_names: dict[int, str], coords: np.ndarray) -> dict[int, str]:
    """Names of atoms the graph cannot tell apart, set by the IUPAC/wwPDB conventions: Arg NH1 cis
    to CD; Asp OD1, Glu OE1, Phe/Tyr CD1 the atom whose side-chain torsion is within ±90°."""
    rule = SYMMETRIC_PAIRS.get(name)
    if not rule:
        return atom_names
    (n1, n2), (a, b, c), _ = rule
    inv = {v: k for k, v in atom_names.items()}
    if not all(x in inv for x in (n1, n2, a, b, c)):
        return atom_names
    t = dihedral(coords[inv[a]], coords[inv[b]], coords[inv[c]], coords[inv[n1]])
    if abs(t) > 90.0:
        out = dict(atom_names)
        out[inv[n1]], out[inv[n2]] = n2, n1
        if name in ("PHE", "TYR"):  # the ring's other pair follows CD1/CD2
            if "CE1" in inv and "CE2" in inv:
                out[inv["CE1"]], out[inv["CE2"]] = "CE2", "CE1"
        return out
    return atom_names


def residue_graph(coords: np.ndarray, classes: Sequence[str], bonds, idx: Sequence[int]) -> nx.Graph:
    g = nx.Graph()
    for i in idx:
        g.add_node(int(i), element=element_of_class(classes[int(i)]))
    g.add_edges_from(recon_bonds(coords, bonds, idx))
    return g


def _composition(g: nx.Graph) -> Counter:
    return Counter(d["element"] for _, d in g.nodes(data=True))


@lru_cache(maxsize=None)
def _template_room(residue: str) -> Counter | None:
    """Element counts of residue ``residue``'s template, OXT left out; None without a template."""
    tg = template_graph(residue)
    if tg is None:
        return None
    return _composition(tg.subgraph([n for n in tg.nodes if n != "OXT"]))


@lru_cache(maxsize=None)
def _template_paths(residue: str) -> dict[str, dict[str, int]]:
    """Bonds between every two atoms of residue ``residue``'s template (shortest path length)."""
    return dict(nx.all_pairs_shortest_path_length(template_graph(residue)))


def can_hold(residue: str, composition: Mapping[str, int], strays: int = 1) -> bool:
    """Whether residue ``residue`` (its template, OXT left out) has room for a group's N, O and S atoms, up to
    ``strays`` N/O of a neighbour (a peptide N or O joins the nearest carbon group). A side-chain tip with
    three N (Arg's guanidinium) cannot be an Ile, whatever label lands nearest to it. Unknown names: True."""
    room = _template_room(residue)
    if room is None:
        return True
    extra = sum(max(0, composition.get(e, 0) - room.get(e, 0)) for e in ("N", "O"))
    return extra <= strays and composition.get("S", 0) <= room.get("S", 0)


# ----------------------------------------------------------------------------- label votes


def _box_distance(xy: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    """Distance (px) from points to a label's box (0 inside)."""
    x0, y0, x1, y1 = box
    dx = np.maximum(np.maximum(x0 - xy[:, 0], 0), xy[:, 0] - x1)
    dy = np.maximum(np.maximum(y0 - xy[:, 1], 0), xy[:, 1] - y1)
    return np.hypot(dx, dy)


def _soft_weights(xy: np.ndarray, box: tuple[int, int, int, int], h: float) -> np.ndarray:
    """How much a label belongs to each point: exp(−d/h) over the points' box distances d (points
    farther than LABEL_GATE_HEIGHTS·h get nothing), normalised over the points."""
    ok = np.isfinite(xy).all(axis=1)
    d = np.full(len(xy), np.inf)
    if ok.any():
        d[ok] = _box_distance(xy[ok], box)
    w = np.where(d <= LABEL_GATE_HEIGHTS * h, np.exp(-d / max(h, 1.0)), 0.0)
    tot = w.sum()
    return w / tot if tot > 0 else w


@dataclass(frozen=True)
class LabelPlacement:
    """How one picture places labels relative to their anchors, measured from the picture itself.

    ``offset`` is the median vector from an anchor to its label's centre when labels sit at one fixed
    offset (a renderer that centres text on, or just above, its atom), else None (labels placed
    wherever there is room, so only the distance to the label's box is informative).
    """

    offset: tuple[float, float] | None
    height: float

    def weights(self, xy: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
        if self.offset is None:
            return _soft_weights(xy, box, self.height)
        ok = np.isfinite(xy).all(axis=1)
        d = np.full(len(xy), np.inf)
        cx, cy = (box[0] + box[2]) / 2.0 - self.offset[0], (box[1] + box[3]) / 2.0 - self.offset[1]
        d[ok] = np.hypot(xy[ok, 0] - cx, xy[ok, 1] - cy)
        h = max(self.height, 1.0)
        w = np.where(d <= LABEL_GATE_HEIGHTS * h, np.exp(-d / (0.5 * h)), 0.0)
        t = w.sum()
        return w / t if t > 0 else w


    def crowded(self, xy: np.ndarray, n_chars: float) -> np.ndarray:
        """Anchors whose label, at the measured fixed offset, would overlap another anchor's label
        (about ``n_chars`` characters of 0.75 text heights wide): their readings are likely merged
        with a neighbour's. Always False under free placement (labels go where there is room)."""
        out = np.zeros(len(xy), bool)
        ok = np.isfinite(xy).all(axis=1)
        if self.offset is None or ok.sum() < 2:
            return out
        w = 0.75 * self.height * n_chars
        P = xy[ok]
        dx = np.abs(P[:, None, 0] - P[None, :, 0]) < w
        dy = np.abs(P[:, None, 1] - P[None, :, 1]) < self.height
        m = dx & dy
        np.fill_diagonal(m, False)
        out[np.flatnonzero(ok)] = m.any(axis=1)
        return out


def label_placement(labels: Sequence[LabelRead], xy: np.ndarray) -> LabelPlacement:
    """Fixed offset or free placement (:class:`LabelPlacement`): the vectors from every label's centre
    to its nearest anchor agree (spread under 1.3 text heights) when the offset is fixed."""
    h = _text_height(labels)
    pts = xy[np.isfinite(xy).all(axis=1)]
    if len(labels) < 3 or len(pts) < 2:
        return LabelPlacement(None, h)
    vec = []
    for lab in labels:
        c = np.array(lab.centre)
        k = int(np.argmin(np.hypot(pts[:, 0] - c[0], pts[:, 1] - c[1])))
        vec.append(c - pts[k])
    vec = np.array(vec)
    m = np.median(vec, axis=0)
    spread = float(np.median(np.hypot(*(vec - m).T)))
    return LabelPlacement((float(m[0]), float(m[1])) if spread < 1.3 * h else None, h)


def _text_height(labels: Sequence[LabelRead]) -> float:
    hs = [lab.box[3] - lab.box[1] for lab in labels]
    return float(np.median(hs)) if hs else 10.0


# ----------------------------------------------------------------------------- residues


def identify_residues(rec, labels_by_view: Mapping[str, ImageLabels], *, known: Mapping[int, tuple[str, int, str]] | None = None
                      ) -> list[ResidueIdentity]:
    """Name and number every pocket residue group of ``rec`` (a Reconstruction).

    ``known`` maps a group to (name, number, insertion code) stated by the question (the
    residue–ligand task names its residue); then only the atom names are worked out.
    """
    coords = np.asarray(rec.coords, float)
    classes = [str(c) for c in rec.classes]
    groups = sorted(int(g) for g in np.unique(rec.residue) if g >= 0)
    # 1. atom names and candidate residue names from the graph
    graph_fits: dict[int, dict[str, tuple[dict[int, str], float]]] = {}
    comps: dict[int, Counter] = {}
    members = {g: [int(i) for i in np.flatnonzero(rec.residue == g)] for g in groups}
    context = {g: peptide_context(rec, members[g]) for g in groups}
    for g in groups:
        idx = members[g]
        rg = residue_graph(coords, classes, rec.bonds, idx)
        comp = _composition(rg)
        comps[g] = comp
        fits = {}
        for name in STANDARD_RESIDUES:
            tg = template_graph(name)
            if tg is None:
                continue
            tcomp = _composition(tg)
            if any(comp[e] > tcomp.get(e, 0) for e in comp):
                continue
            m, fit = match_template(rg, name, coords, context.get(g))
            if m is not None:
                fits[name] = (m, fit)
        graph_fits[g] = fits
    # 2. OCR votes: per view, residue labels to residue anchors (CA when a fit names one, else the centroid)
    votes: dict[int, Counter] = {g: Counter() for g in groups}
    name_votes: dict[int, Counter] = {g: Counter() for g in groups}
    for view, labs in labels_by_view.items():
        xy_all = rec.image_xy.get(view)
        if xy_all is None:
            continue
        res_labels = labs.of_kind("residue")
        if not res_labels:
            continue
        pts = []
        for g in groups:
            ca = _ca_index(graph_fits[g])
            if ca is not None and np.isfinite(xy_all[ca]).all():
                pts.append(xy_all[ca])
            else:
                sub = xy_all[members[g]]
                sub = sub[np.isfinite(sub).all(axis=1)]
                pts.append(sub.mean(axis=0) if len(sub) else (np.nan, np.nan))
        pts = np.array(pts, float).reshape(-1, 2)
        place = label_placement(res_labels, pts)
        trust = np.where(place.crowded(pts, 6.0), CROWDED_WEIGHT, 1.0)
        for lab in res_labels:
            rr = residue_reading(lab)
            if rr is None:
                continue
            name, number, lp = rr
            conf = math.exp(lp / max(1, len(lab.glyphs)))
            w = place.weights(pts, lab.box) * trust
            for gi in np.flatnonzero(w > 0.02):
                votes[groups[gi]][(name, number)] += conf * float(w[gi])
                name_votes[groups[gi]][name] += conf * float(w[gi])
    # 3. one label text per residue: a global assignment groups x texts maximising the evidence,
    #    a text whose residue name the group's graph cannot be counting for little
    #    A text read in two or more views is triangulated (:func:`label_anchors_3d`) and then judged in 3D, by how
    #    near its point lies to the group's atoms: per view, a label drawn in a free spot beside its CA is often
    #    nearer a neighbour's atoms, but the views disagree about which neighbour.
    free = [g for g in groups if not (known and g in known)]
    #    A text drawn at two places in one view names two residues (two copies of a chain around the ligand): it
    #    enters the assignment once per copy, judged by its per-view votes (triangulated, its reads of both places
    #    would meet between the residues).
    copies = label_copies(labels_by_view)
    anchors = {t: a for t, a in (label_anchors_3d(rec, labels_by_view) if free else {}).items() if t not in copies}
    misread = misread_label_texts(anchors, labels_by_view, float(rec.distance)) | cut_short_texts(labels_by_view)
    anchors = {t: a for t, a in anchors.items() if t not in misread}
    texts = sorted(({t for g in groups for t in votes[g]} | set(anchors)) - misread)
    texts = [t for t in texts for _ in range(copies.get(t, 1))]
    chosen: dict[int, tuple[str, str]] = {}
    if texts and free:
        S = np.zeros((len(free), len(texts)))
        D = float(rec.distance)
        anchor_texts = list(anchors)
        anchor_a = np.array([anchors[t] for t in anchor_texts]).reshape(-1, 3) * D - np.array([0.0, 0.0, D])  # Å
        for a, g in enumerate(free):
            fits = graph_fits[g]
            gap = np.linalg.norm(coords[members[g]][:, None, :] - anchor_a[None], axis=2).min(axis=0)
            near = dict(zip(anchor_texts, gap.tolist()))
            for b, t in enumerate(texts):
                if t in anchors:
                    d = near[t]
                    ev = LABEL_3D_WEIGHT * math.exp(-0.5 * (d / LABEL_3D_SIGMA_A) ** 2) if d <= LABEL_3D_MAX_A else 0.0
                else:
                    ev = votes[g].get(t, 0.0)
                if ev <= 0:
                    continue
                fit = fits.get(t[0], (None, 0.0))[1]
                S[a, b] = ev * (1.0 if fit >= 0.6 or t in anchors else 0.25 if not fits else 0.1)
                if not can_hold(t[0], comps[g]):
                    S[a, b] *= MISFIT_WEIGHT
        linked = group_gaps(coords, [members[g] for g in free]) <= CHAIN_LINK_A
        for a, b in threaded_assignment(S, [_text_number(t) for t in texts], linked).items():
            chosen[free[a]] = texts[b]
    out: dict[int, ResidueIdentity] = {}
    for g in groups:
        fits = graph_fits[g]
        if known and g in known:
            name, number, ins = known[g]
            m, fit = fits.get(name, (None, 0.0))
            if m is None:
                m, fit = _best_partial(coords, classes, rec.bonds, members[g], name)
            m = iupac_names(name, m or {}, coords)
            out[g] = ResidueIdentity(g, tuple(members[g]), name, number, ins, m, fit, "question", "question",
                                     completed=complete_residue(name, m, coords))
            continue
        nv = Counter({chosen[g][0]: 1.0}) if g in chosen else name_votes[g]
        name, src = _decide_name(fits, nv)
        if g in chosen and chosen[g] in anchors and name != chosen[g][0]:  # a label seen in 3D outranks the
            name, src = chosen[g][0], "ocr"  # template fitted to pseudo-atoms (1.3 Å apart along the sticks)
        m, fit = fits.get(name, (None, 0.0))
        if m is None:
            m, fit = _best_partial(coords, classes, rec.bonds, members[g], name)
        number, ins, nsrc = None, "", "none"
        if g in chosen:
            try:
                number, ins = _split_number(chosen[g][1])
                nsrc = "ocr"
            except ValueError:
                pass
        m = iupac_names(name, m or {}, coords)
        out[g] = ResidueIdentity(g, tuple(members[g]), name, number, ins, m, fit, src, nsrc,
                                 {f"{n} {num}": w for (n, num), w in votes[g].items()},
                                 complete_residue(name, m, coords))
    strong = {g for g in groups if g in chosen and chosen[g] in anchors}
    out = _merge_fragments(out, strong, comps, coords, classes, rec.bonds)
    return _peptide_numbers([out[g] for g in groups if g in out], coords)


def group_gaps(coords: np.ndarray, members: Sequence[Sequence[int]]) -> np.ndarray:
    """The distance (Å) between the nearest atoms of every two groups (``members``: atom indices per group),
    infinite on the diagonal and for empty groups. Groups of one chain that follow each other are bonded
    (C–N 1.33 Å), so they lie about a bond apart; other residues keep van der Waals distance (3 Å and more)."""
    n = len(members)
    out = np.full((n, n), np.inf)
    full = [k for k in range(n) if len(members[k])]
    if len(full) < 2:
        return out
    starts = np.cumsum([0] + [len(members[k]) for k in full[:-1]])
    d = cdist(*[np.vstack([coords[list(members[k])] for k in full])] * 2)
    out[np.ix_(full, full)] = np.minimum.reduceat(np.minimum.reduceat(d, starts, axis=0), starts, axis=1)
    np.fill_diagonal(out, np.inf)
    return out


def threaded_assignment(evidence: np.ndarray, numbers: Sequence[int | None], linked: np.ndarray,
                        bonus: float = CHAIN_BONUS) -> dict[int, int]:
    """Groups (rows of ``evidence``) to label texts (columns, residue ``numbers``): the assignment that gains
    the most label evidence plus ``bonus`` for every two ``linked`` groups (covalent neighbours in the chain)
    whose texts' numbers differ by one. A group takes only a text with evidence for it.

    Label evidence alone is judged residue by residue, and in a dense pocket a label drawn beside its residue
    is as near a neighbour's atoms; the chain is the check that cuts across residues: sequence neighbours
    are bonded, so a run of consecutive numbers should sit on a run of linked groups. The search starts from
    the linear assignment of the evidence alone and moves one text at a time to another group (the group's
    own text going to the text's holder, if it has evidence there) while the total grows: a local search in
    a fixed order, deterministic. Returns {row: column}."""
    ev = np.asarray(evidence, float)
    n = ev.shape[0]
    asg = np.full(n, -1, int)
    if ev.size:
        for a, b in zip(*linear_sum_assignment(-ev)):
            if ev[a, b] > 0:
                asg[a] = b
    nbrs = [np.flatnonzero(linked[a]).tolist() for a in range(n)]

    def chain(a: int, t: int, skip: int = -1) -> float:
        if t < 0 or numbers[t] is None:
            return 0.0
        return bonus * sum(1 for b in nbrs[a] if b != skip and asg[b] >= 0 and numbers[asg[b]] is not None
                           and abs(numbers[asg[b]] - numbers[t]) == 1)

    def score(a: int, b: int) -> float:  # groups a and b (b may be -1): their evidence and chain bonuses
        s = (ev[a, asg[a]] if asg[a] >= 0 else 0.0) + chain(a, asg[a])
        if b >= 0:
            s += (ev[b, asg[b]] if asg[b] >= 0 else 0.0) + chain(b, asg[b], skip=a)
        return s

    holder = {int(t): a for a, t in enumerate(asg) if t >= 0}
    improved = bool(bonus) and any(nbrs)
    while improved:
        improved = False
        for a in range(n):
            for t in np.flatnonzero(ev[a] > 0).tolist():
                if t == asg[a]:
                    continue
                b = holder.get(t, -1)
                old, before = int(asg[a]), score(a, b)
                asg[a] = t
                if b >= 0:
                    asg[b] = old if old >= 0 and ev[b, old] > 0 else -1
                if score(a, b) > before + 1e-9:
                    holder = {int(x): k for k, x in enumerate(asg) if x >= 0}
                    improved = True
                else:
                    asg[a] = old
                    if b >= 0:
                        asg[b] = t
    return {a: int(asg[a]) for a in range(n) if asg[a] >= 0}


def _text_number(text: tuple[str, str]) -> int | None:
    """The residue number of a label text (name, number with an optional insertion code), None if unreadable."""
    try:
        return _split_number(text[1])[0]
    except ValueError:
        return None


def _fragment_names(rg: nx.Graph, name: str, coords: np.ndarray, taken: Mapping[int, str]) -> dict[int, str]:
    """Names for a piece of residue ``name`` whose other atoms are named ``taken``: among the piece's template
    namings (its largest part that fits), those that name no atom twice, the one whose atoms lie within
    reach of the named ones (at most :data:`BOND_REACH_A` per template bond between them); empty when none fits."""
    if template_graph(name) is None:
        return {}
    path = _template_paths(name)
    used = set(taken.values())
    best: tuple[float, dict[int, str]] | None = None
    for mp in _largest_part_mappings(rg, name, coords):
        if set(mp.values()) & used:
            continue
        over = sum(max(0.0, float(np.linalg.norm(coords[i] - coords[j])) - BOND_REACH_A * path[a].get(b, 99))
                   for i, a in taken.items() for j, b in mp.items())
        if best is None or over < best[0] - 1e-9:
            best = (over, dict(mp))
    return best[1] if best is not None and best[0] < 1.0 else {}


def _merge_fragments(out: Mapping[int, ResidueIdentity], strong: Collection[int], comps: Mapping[int, Counter],
                     coords: np.ndarray, classes: Sequence[str], bonds) -> dict[int, ResidueIdentity]:
    """Residues whose pieces the reconstruction split apart, put back together: a group without a label
    seen in 3D (``strong``: its label was triangulated over the views) joins the nearest labelled group of its
    carbon colour within :data:`FRAGMENT_GAP_A` whose residue can hold both (:func:`can_hold`); its atoms are
    named as part of that residue where the names do not clash. A residue's label lands near its CA, so a
    side-chain tip cut off by a gap in the sticks otherwise takes a stray one-view reading (or a neighbour's
    label) and its atoms, often the ones that make the H-bonds, are named as another residue."""
    from dataclasses import replace

    from misi_agent.tools.atom_detection import POCKET_CLASSES

    def colour(r: ResidueIdentity) -> str | None:
        cs = [classes[i] for i in r.atoms if classes[i] in POCKET_CLASSES]
        return max(sorted(set(cs)), key=cs.count) if cs else None

    res = dict(out)
    targets = [h for h in strong if h in res]
    if not targets:
        return res
    comp = {h: Counter(comps[h]) for h in targets}  # grows as pieces join
    hue = {h: colour(res[h]) for h in targets}
    for g in sorted(res):
        if g in strong:
            continue
        r = res[g]
        best = None
        for h in targets:
            t = res[h]
            if hue[h] != colour(r) or not can_hold(t.name, comps[g] + comp[h]):
                continue
            gap = float(np.min(np.linalg.norm(coords[list(r.atoms)][:, None] - coords[list(t.atoms)][None], axis=2)))
            if gap <= FRAGMENT_GAP_A and (best is None or gap < best[0]):
                best = (gap, h)
        if best is None:
            continue
        t = res[best[1]]
        names = dict(t.atom_names)
        names.update(_fragment_names(residue_graph(coords, classes, bonds, list(r.atoms)), t.name, coords, names))
        names = iupac_names(t.name, names, coords)
        atoms = tuple(t.atoms) + tuple(r.atoms)
        res[best[1]] = replace(t, atoms=atoms, atom_names=names, completed=complete_residue(t.name, names, coords))
        comp[best[1]] += comps[g]
        del res[g]
    return res


DUPLICATE_APART_HEIGHTS = 4.0  # two reads of one text this many text heights apart in one view are two labels


def label_copies(labels_by_view: Mapping[str, ImageLabels]) -> dict[tuple[str, str], int]:
    """Residue texts drawn for more than one residue, and for how many: the largest number of places
    (:data:`DUPLICATE_APART_HEIGHTS` text heights apart) at which each of two or more views reads the text. A pocket
    at the interface of two copies of a chain shows ``ARG 54`` twice, as chains are not drawn; a misread seldom
    repeats at two places in two views. Texts read at one place are left out."""
    seen: dict[tuple[str, str], list[int]] = {}
    for labs in labels_by_view.values():
        apart = DUPLICATE_APART_HEIGHTS * _text_height(labs.of_kind("residue"))
        for text, pts in _residue_text_centres(labs).items():
            distinct: list[np.ndarray] = []
            for p in pts:
                if all(np.linalg.norm(p - q) > apart for q in distinct):
                    distinct.append(p)
            seen.setdefault(text, []).append(len(distinct))
    second = {t: sorted(n)[-2] for t, n in seen.items() if len(n) >= 2}  # places seen in at least two views
    return {t: k for t, k in second.items() if k >= 2}


def misread_label_texts(anchors: Mapping[tuple[str, str], np.ndarray], labels_by_view: Mapping[str, ImageLabels],
                        distance: float, max_apart_a: float = SAME_LABEL_A) -> set[tuple[str, str]]:
    """Texts that are another text's label read differently: the same residue name, triangulated
    (:func:`label_anchors_3d`, in units of the camera ``distance``) within ``max_apart_a`` Å of it, and never read
    in a view that reads the other. One label seen from six sides is read whole in some views and cut in others
    (``GLU 441`` from three sides, ``GLU 2`` from the other three where atoms in front hide its digits); two
    residues of one name side by side (``GLY 79``, ``GLY 80``) are both read in most views. Of such a pair the
    text read in more views stands, then the one read with more confidence (summed over its reads, rounded; a
    glyph of an overlapping label read into a number, ``TYR 3413`` for ``TYR 413`` in PyMOL's pictures, is read
    unsurely), then the one with more digits (a label cut short by atoms in front loses glyphs); where none of the
    three tells them apart both stand. Measured on the 44 raster and 20 PyMOL T9 items' reads (true structures read
    only to measure): within 3.5 Å, 19 texts taken for misreads, all of them misreads; two true texts of one name,
    each read in two views, stand (PyMOL's ILE 254 and 255, 2.9 Å apart). Farther apart, PyMOL's pictures hold such
    pairs of true texts (from 3.7 Å)."""
    seen, sure = _text_reads(labels_by_view)

    def weight(t: tuple[str, str]) -> tuple:
        return len(seen.get(t, ())), round(sure[t]), sum(ch.isdigit() for ch in t[1])  # digits: an insertion code is none

    out: set[tuple[str, str]] = set()
    for a, b in combinations(sorted(anchors), 2):
        if a[0] != b[0] or seen.get(a, set()) & seen.get(b, set()) or weight(a) == weight(b):
            continue
        if np.linalg.norm(np.asarray(anchors[a]) - np.asarray(anchors[b])) * distance <= max_apart_a:
            out.add(min(a, b, key=weight))
    return out


def cut_short_texts(labels_by_view: Mapping[str, ImageLabels], min_views: int = SHORT_NUMBER_MIN_VIEWS
                    ) -> set[tuple[str, str]]:
    """Residue texts with a one-digit number read in fewer than ``min_views`` views: labels cut short, not labels.

    A label partly hidden by atoms in front, or under another label, keeps its name and loses digits, and a lone
    first digit is what most often stays (``GLU 2`` for ``GLU 441``, ``CYS 2`` for ``CYS 230``); residues 1–9 open a
    chain and seldom line a pocket, and a true one's label is read from most sides. On the reads of 108 T9 items
    (64 + 24 raster, 20 PyMOL; true residues read only to measure), of the one-digit texts read in one or two views
    none names a residue of the pocket (0 of 874), of those read in three 3 of 14, in four or more 27 of 28.

    Longer numbers are cut short too (``GLU 44`` for ``GLU 441``): a text whose number begins the number of another
    text of the same name, never read in a view that reads the other and read in fewer views, is taken for it cut
    short. On the same items' reads (88: 68 raster, 20 PyMOL) such texts of two or more digits name no residue of
    the item (0 of 407; 398 of them not caught before, as they were read in one view or lie apart from the whole
    label's triangulated place)."""
    seen, _ = _text_reads(labels_by_view)
    short = {t for t, views in seen.items() if len(t[1].lstrip("-").rstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ")) == 1
             and len(views) < min_views}
    for a, b in permutations(seen, 2):  # a number that begins a longer one of the same name read in more views
        if a[0] == b[0] and b[1].startswith(a[1]) and not seen[a] & seen[b] and len(seen[a]) < len(seen[b]):
            short.add(a)
    return short


def _text_reads(labels_by_view: Mapping[str, ImageLabels]) -> tuple[dict[tuple[str, str], set[str]], Counter]:
    """Each residue text (name, number) read in some view: the views that read it, and its reads' summed per-glyph
    confidence."""
    seen: dict[tuple[str, str], set[str]] = {}
    sure: Counter = Counter()
    for view, labs in labels_by_view.items():
        for lab in labs.of_kind("residue"):
            rr = residue_reading(lab)
            if rr is not None:
                seen.setdefault(rr[:2], set()).add(view)
                sure[rr[:2]] += math.exp(rr[2] / max(1, len(lab.glyphs)))
    return seen, sure


def _residue_text_centres(labs: ImageLabels) -> dict[tuple[str, str], list[np.ndarray]]:
    """Each residue text (name, number) read in one view, with the centres of the label boxes that read it."""
    out: dict[tuple[str, str], list[np.ndarray]] = {}
    for lab in labs.of_kind("residue"):
        rr = residue_reading(lab)
        if rr is not None:
            out.setdefault((rr[0], rr[1]), []).append(np.array(lab.centre))
    return out


def label_anchors_3d(rec, labels_by_view: Mapping[str, ImageLabels], fov_deg: float | None = None
                     ) -> dict[tuple[str, str], np.ndarray]:
    """Each residue label text read in two or more views, triangulated to one point (normalised front frame,
    the reconstruction's units: centroid at the origin, camera distance 1): the point whose projections
    are nearest the label's box centres in those views (robust to one misplaced read). A residue's label
    is drawn at or beside its CA, so the point lands near the residue (median 2.5 Å on raster pocket
    pictures, where labels are pushed out of crowded spots)."""
    from scipy.optimize import least_squares

    from misi_agent.tools.label_triangulation import cameras

    reads: dict[tuple[str, str], list] = {}
    for view, cam in cameras(rec, labels_by_view, fov_deg).items():
        for text, pts in _residue_text_centres(labels_by_view[view]).items():
            reads.setdefault(text, []).extend((cam, p) for p in pts)
    out = {}
    for text, obs in reads.items():
        if len({cam.name for cam, _ in obs}) < 2:
            continue

        def res(p, obs=obs):
            return np.concatenate([cam.project(p[None])[0][0] - uv for cam, uv in obs])

        out[text] = least_squares(res, np.zeros(3), loss="soft_l1", f_scale=20.0).x
    return out


def _ca_index(fits: Mapping[str, tuple[dict[int, str], float]]) -> int | None:
    for m, _ in fits.values():
        for i, n in m.items():
            if n == "CA":
                return i
    return None


def _decide_name(fits: Mapping[str, tuple[dict[int, str], float]], name_votes: Counter) -> tuple[str, str]:
    """The residue name: OCR's when its template fits the graph, else the best-fitting template
    (OCR breaking ties), else OCR's alone."""
    complete = {n: f for n, (m, f) in fits.items()}
    ocr = [n for n, _ in name_votes.most_common()]
    best = max(complete.values()) if complete else 0.0
    for n in ocr:  # OCR's name when its template fits as well as any other
        if n in complete and complete[n] >= max(0.6, best - 1e-9):
            return n, "ocr+graph"
    if complete:
        tops = [n for n, f in complete.items() if f >= best - 1e-9]
        if best >= 0.8:
            for n in ocr:
                if n in tops:
                    return n, "ocr+graph"
            return sorted(tops)[0], "graph"
    for n in ocr:
        if n in complete and complete[n] >= 0.6:
            return n, "ocr+graph"
    if ocr:
        return ocr[0], "ocr"
    if complete:
        return max(complete, key=complete.get), "graph"
    return "UNK", "none"


def _best_partial(coords, classes, bonds, idx, name) -> tuple[dict[int, str] | None, float]:
    """Atom names when the whole graph does not fit: the largest connected part containing no extra atom
    is matched; the remaining polar atoms get the name of the nearest template polar atom by graph role."""
    tg = template_graph(name)
    if tg is None:
        return None, 0.0
    maps = _largest_part_mappings(residue_graph(coords, classes, bonds, idx), name)
    return (dict(maps[0]), _template_share(name, maps[0])) if maps else (None, 0.0)


FITTED_PEPTIDE_CN = (1.0, 1.7)  # Å: C–N of two fitted residues in this range is a peptide bond (0.1-0.3 Å fits)


def truncated_numbers_repaired(res: Sequence[ResidueIdentity]) -> list[ResidueIdentity]:
    """After fitting: a residue number that is a cut-off or overgrown reading of the one its peptide neighbour implies
    takes the implied number.

    A label partly hidden under another reads confidently short (``THR 32`` for ``THR 344``, ``ARG 5`` for
    ``ARG 54``), and one that runs into a neighbour's digits long (``PRO 7565`` for ``PRO 75``). The fitted residues'
    backbone C and N (:attr:`ResidueIdentity.completed`) find the peptide links, which the pseudo-atoms before
    fitting often miss. For a link a→b whose numbers are not consecutive, the number one side implies for the other
    replaces the other's reading when that reading is shorter with the same first character, or longer and starting
    with it, or differs from it in one digit (``GLN 641`` for ``GLN 640``) while a residue of another name holds the
    read number on stronger label evidence (:func:`_outvoted`); only when every link of the residue implies the same
    number, never both sides of one link and never a residue already consecutive with a linked neighbour whose
    number was read, not derived from a neighbour's reading (such a number would confirm the misreading it came from;
    repeated, as a repair confirms its neighbours).
    """
    cs = {k: np.asarray(r.completed["C"], float) for k, r in enumerate(res) if "C" in r.completed}
    ns = {k: np.asarray(r.completed["N"], float) for k, r in enumerate(res) if "N" in r.completed}
    links = _peptide_links(cs, ns, FITTED_PEPTIDE_CN)
    derived = {k for k, r in enumerate(res) if r.number_source != "ocr"}  # numbered from a neighbour's reading
    out = list(res)
    for _ in range(len(res)):  # a repair can confirm a neighbour, whose other link then becomes unambiguous
        num = [r.number for r in out]
        confirmed = {k for a, b in links if num[a] is not None and num[b] == num[a] + 1
                     and not {a, b} & derived for k in (a, b)}
        implied: dict[int, set[int]] = {}
        for a, b in links:
            na, nb = num[a], num[b]
            if na is None or nb is None or nb == na + 1:
                continue
            fix = [(k, want) for k, want in ((b, na + 1), (a, nb - 1))
                   if k not in confirmed and (_reading_of(str(num[k]), str(want))
                                              or (_one_digit_misread(str(num[k]), str(want)) and _outvoted(out, k)))]
            if len(fix) == 1:
                implied.setdefault(fix[0][0], set()).add(fix[0][1])
        done = [(k, wants.pop()) for k, wants in implied.items() if len(wants) == 1]
        if not done:
            break
        for k, want in done:
            out[k] = replace(out[k], number=want, number_source="peptide")
    return out


def _peptide_links(c_of: Mapping[int, np.ndarray], n_of: Mapping[int, np.ndarray], window: tuple[float, float]
                   ) -> list[tuple[int, int]]:
    """(a, b) for every residue a whose backbone C lies within ``window`` (Å) of residue b's N: a peptide bond a→b.
    In the order of ``c_of`` and then ``n_of``."""
    return [(a, b) for a, c in c_of.items() for b, n in n_of.items()
            if a != b and window[0] <= float(np.linalg.norm(c - n)) <= window[1]]


def _reading_of(read: str, true: str) -> bool:
    """Could ``read`` be a cut-off (shorter, same first character) or overgrown (longer, starting with it, which
    one character does not make likely) reading of ``true``?"""
    return ((len(read) < len(true) and read[:1] == true[:1])
            or (len(true) >= 2 and len(read) > len(true) and read.startswith(true)))


def _one_digit_misread(read: str, true: str) -> bool:
    """Do ``read`` and ``true`` differ in exactly one character of the same length (``641`` for ``640``, ``131``
    for ``181``: a digit of a label half covered by another read as its look-alike)?"""
    return len(read) == len(true) and sum(x != y for x, y in zip(read, true)) == 1


def _own_votes(r: ResidueIdentity) -> float:
    """The label evidence for the residue's own name and number (0 when no text read near it says so)."""
    return float(r.ocr_votes.get(f"{r.name} {r.number}{r.ins_code}", 0.0))


def _outvoted(res: Sequence[ResidueIdentity], k: int) -> bool:
    """Is residue ``k``'s number held by a residue of another name whose labels say so more strongly? A number
    names one residue of a chain, so the weaker claim is the likelier misreading (two pieces of one residue share
    name and number and do not count)."""
    me = res[k]
    mine = _own_votes(me)
    return any(j != k and r.number == me.number and r.ins_code == me.ins_code and r.name != me.name
               and _own_votes(r) > mine for j, r in enumerate(res))


def _split_number(text: str) -> tuple[int, str]:
    t = text.strip()
    ins = ""
    if t and t[-1].isalpha():
        t, ins = t[:-1], t[-1]
    return int(t), ins


def _peptide_numbers(res: list[ResidueIdentity], coords: np.ndarray) -> list[ResidueIdentity]:
    """Residues linked by a peptide bond (this C to that N) are numbered n, n+1: a run of linked
    residues takes the numbering its labels support best as a whole, numbers fill in along chains
    and a number that disagrees with both linked neighbours is replaced."""
    def backbone(name: str) -> dict[int, np.ndarray]:
        return {k: coords[i] for k, r in enumerate(res) for i, n in r.atom_names.items() if n == name}

    nxt = dict(_peptide_links(backbone("C"), backbone("N"), PEPTIDE_CN))
    prv = {b: a for a, b in nxt.items()}
    nums = [r.number for r in res]
    src = [r.number_source for r in res]
    # runs of linked residues are numbered consecutively: the start that the labels' evidence over
    # the whole run supports best (each member's votes for "NAME n" at its place in the run)
    seen: set[int] = set()
    for k in range(len(res)):
        if k in prv or k in seen or k not in nxt:
            continue
        run, j = [], k
        while j is not None and j not in seen:
            seen.add(j)
            run.append(j)
            j = nxt.get(j)
        starts: Counter = Counter()
        for pos, m in enumerate(run):
            for text, w in res[m].ocr_votes.items():
                name, _, num = text.partition(" ")
                if name == res[m].name and num.lstrip("-").isdigit():
                    starts[int(num) - pos] += w
        if starts:
            s0 = starts.most_common(1)[0][0]
            for pos, m in enumerate(run):
                if nums[m] != s0 + pos:
                    nums[m], src[m] = s0 + pos, "peptide"
    # correct: a number disagreeing with both neighbours that agree with each other
    for k in range(len(res)):
        a, b = prv.get(k), nxt.get(k)
        if a is not None and b is not None and nums[a] is not None and nums[b] is not None and nums[b] == nums[a] + 2:
            if nums[k] != nums[a] + 1:
                nums[k], src[k] = nums[a] + 1, "peptide"
    for _ in range(len(res)):
        changed = False
        for a, b in nxt.items():
            if nums[a] is not None and nums[b] is None:
                nums[b], src[b], changed = nums[a] + 1, "peptide", True
            elif nums[b] is not None and nums[a] is None:
                nums[a], src[a], changed = nums[b] - 1, "peptide", True
        if not changed:
            break
    out = []
    for r, n, s in zip(res, nums, src):
        out.append(ResidueIdentity(r.group, r.atoms, r.name, n, r.ins_code, r.atom_names, r.graph_fit, r.name_source,
                                   s, r.ocr_votes, r.completed))
    return out


# ----------------------------------------------------------------------------- ligand names


def identify_ligand(rec, labels_by_view: Mapping[str, ImageLabels]) -> LigandIdentity:
    """Ligand atom names from the name labels of every view (see the module docstring)."""
    lig = np.flatnonzero(np.asarray(rec.is_ligand, bool))
    elements = [element_of_class(rec.classes[i]) for i in lig]
    votes: list[Counter] = [Counter() for _ in lig]
    n_read = 0
    for view, labs in labels_by_view.items():
        xy_all = rec.image_xy.get(view)
        if xy_all is None:
            continue
        names = labs.of_kind("ligand")
        n_read += len(names)
        if not names:
            continue
        xy = np.asarray(xy_all, float)[lig]
        place = label_placement(names, xy)
        trust = np.where(place.crowded(xy, 3.0), CROWDED_WEIGHT, 1.0)
        readings: dict[tuple[int, str], tuple[str, float]] = {}
        for k, lab in enumerate(names):
            w = place.weights(xy, lab.box) * trust
            for j in np.flatnonzero(w > 0.02):
                el = elements[j]
                key = (k, el)
                if key not in readings:
                    readings[key] = atom_name_reading(lab.glyphs, el.upper() if el != "X" else None)
                name, lp = readings[key]
                if name:
                    # a longer reading is less likely a fragment of overlapping labels
                    votes[j][name] += float(w[j]) * math.exp(lp / max(1, len(lab.glyphs))) * math.sqrt(len(lab.glyphs))
    # unique names: an assignment atoms x names maximising the votes
    all_names = sorted({n for v in votes for n in v})
    result: dict[int, str] = {}
    support: dict[int, float] = {}
    if all_names:
        W = np.array([[v.get(n, 0.0) for n in all_names] for v in votes])
        r, c = linear_sum_assignment(-W)
        for a, b in zip(r, c):
            if W[a, b] > 0:
                result[int(lig[a])] = all_names[b]
                tot = sum(votes[a].values())
                support[int(lig[a])] = float(W[a, b] / tot) if tot else 0.0
    result = _nucleoside_primes(rec, lig, result)
    counts: Counter = Counter()
    for j, i in enumerate(lig):
        if int(i) not in result:
            counts[elements[j]] += 1
            result[int(i)] = f"?{elements[j].upper()}{counts[elements[j]]}"
            support[int(i)] = 0.0
    return LigandIdentity(result, support, n_read)


_SUGAR_NAME = re.compile(r"^[CO][1-6]$")


def _nucleoside_primes(rec, lig: np.ndarray, names: dict[int, str]) -> dict[int, str]:
    """The prime of sugar atom names, which small text loses first: in a ligand with a sugar ring
    (a 5/6-ring with one O) joined to another ring (a base), the sugar's ring atoms and their
    exocyclic C/O neighbours are named ``C1'``…``O5'`` (wwPDB convention for nucleosides and
    nucleotide cofactors). A sugar atom read as ``C4`` becomes ``C4'`` unless that name is taken."""
    idx = [int(i) for i in lig]
    g = nx.Graph()
    g.add_nodes_from(idx)
    g.add_edges_from(recon_bonds(np.asarray(rec.coords, float), rec.bonds, idx))
    el = {i: element_of_class(rec.classes[i]) for i in idx}
    rings = [c for c in nx.cycle_basis(g) if len(c) in (5, 6)]
    sugar_rings = [c for c in rings if sum(el[i] == "O" for i in c) == 1 and all(el[i] in ("C", "O") for i in c)]
    if not sugar_rings:
        return names
    in_ring = {i for c in rings for i in c}
    out = dict(names)
    used = set(out.values())
    for ring in sugar_rings:
        others = in_ring - set(ring)
        if not any(nb in others for i in ring for nb in g.neighbors(i)):
            continue  # no base attached: a plain sugar keeps unprimed names
        sugar = set(ring)
        for i in ring:
            for nb in g.neighbors(i):
                if nb not in in_ring and el[nb] in ("C", "O"):
                    sugar.add(nb)
                    sugar.update(x for x in g.neighbors(nb) if x not in in_ring and el[x] == "O")
        for i in sorted(sugar):
            n = out.get(i)
            if n and _SUGAR_NAME.match(n) and n + "'" not in used:
                used.discard(n)
                out[i] = n + "'"
                used.add(out[i])
    return out


# ----------------------------------------------------------------------------- ligand chemistry


VALENCE = {"C": 4, "N": 3, "O": 2, "S": 2, "P": 5, "F": 1, "Cl": 1, "Br": 1, "I": 1, "B": 3, "Se": 2}


def _angles(coords: np.ndarray, i: int, nb: Sequence[int]) -> list[float]:
    """Every angle neighbour–i–neighbour in degrees."""
    return [angle(coords[nb[a]], coords[i], coords[nb[b]]) for a in range(len(nb)) for b in range(a + 1, len(nb))]


_LONGER_SINGLE = {"S": 0.28, "Se": 0.42}  # Å an element's single bond to C runs longer than C–C's 1.54 Å (C–S 1.82,
# C–Se 1.96): taken off each of its ring bonds before the short-bond test, so that a thiophene's or thiazole's C–S
# (1.71–1.74 Å) counts as the aromatic bond it is and a thiazolidine's (1.82 Å) as single


def _planar_rings(mol: Chem.Mol, coords: np.ndarray, sigma: float = 0.0) -> set[int]:
    """Atoms of aromatic-looking 5/6-rings: flat (RMS distance to the best plane under 0.12 Å, or
    1.2 σ for coordinates uncertain by σ Å) with short bonds (mean under 1.45 Å plus the bias of
    noise, bonds to S or Se counted as a C–C of the same stretch, :data:`_LONGER_SINGLE`; saturated rings are
    puckered and have 1.47–1.54 Å bonds)."""
    out = set()
    for ring in mol.GetRingInfo().AtomRings():
        if len(ring) not in (5, 6):
            continue
        P = coords[list(ring)]
        Q = P - P.mean(axis=0)
        s = np.linalg.svd(Q, compute_uv=False)
        stretch = [_LONGER_SINGLE.get(mol.GetAtomWithIdx(i).GetSymbol(), 0.0) for i in ring]
        bonds = [np.linalg.norm(P[k] - P[(k + 1) % len(ring)]) - stretch[k] - stretch[(k + 1) % len(ring)]
                 for k in range(len(ring))]
        if s[-1] / math.sqrt(len(ring)) < max(0.12, 1.2 * sigma) and float(np.mean(bonds)) < 1.45 + 0.1 * sigma:
            out.update(ring)
    return out


def _single_bonded(elements: Sequence[str], bonds: Sequence[tuple[int, int]]) -> Chem.RWMol:
    """The atoms (unknown element ``X`` as C) joined by single bonds: the graph before bond orders."""
    rw = Chem.RWMol()
    for el in elements:
        rw.AddAtom(Chem.Atom(el if el != "X" else "C"))
    for a, b in bonds:
        if rw.GetBondBetweenAtoms(int(a), int(b)) is None:
            rw.AddBond(int(a), int(b), Chem.BondType.SINGLE)
    return rw


# most heavy neighbours an atom of the element has in a ligand; not VALENCE: a sulfonyl S or a phosphate P holds
# four heavy neighbours with valence 6 and 5
MAX_HEAVY_NEIGHBOURS = {"C": 4, "N": 3, "O": 2, "S": 4, "P": 4, "F": 1, "Cl": 1, "Br": 1, "I": 1, "B": 3, "Se": 2}


def valence_pruned(elements: Sequence[str], coords: np.ndarray, bonds: Sequence[tuple[int, int]]
                   ) -> list[tuple[int, int]]:
    """``bonds`` without the ones no chemistry allows: while an atom has more heavy neighbours than its element
    can hold (:data:`MAX_HEAVY_NEIGHBOURS`; unknown elements as C), its longest bond goes, longest first overall.

    Bonds between reconstructed atoms are inferred from distance, and pseudo-atoms along the ligand's sticks sit
    closer than real neighbours, so a carbon gets five to seven bonds and an O three; RDKit then cannot sanitise
    the molecule and every bond order is lost (14 of 20 raster pocket–ligand ligands before this pruning).
    """
    coords = np.asarray(coords, float)
    room = [MAX_HEAVY_NEIGHBOURS.get(el, 4) for el in elements]
    uniq = sorted({(min(int(a), int(b)), max(int(a), int(b))) for a, b in bonds if int(a) != int(b)})
    deg = Counter(i for ab in uniq for i in ab)
    kept = set(uniq)
    for a, b in sorted(uniq, key=lambda ab: -float(np.linalg.norm(coords[ab[0]] - coords[ab[1]]))):
        if deg[a] > room[a] or deg[b] > room[b]:
            kept.discard((a, b))
            deg[a] -= 1
            deg[b] -= 1
    return [ab for ab in uniq if ab in kept]


def _neighbour_lists(bonds: Sequence[tuple[int, int]]) -> dict[int, list[int]]:
    """Each atom's bonded neighbours from a list of index pairs (atoms without a bond are absent)."""
    nb: dict[int, list[int]] = {}
    for a, b in bonds:
        nb.setdefault(int(a), []).append(int(b))
        nb.setdefault(int(b), []).append(int(a))
    return nb


def other_elements(elements: Sequence[str], names: Sequence[str], bonds: Sequence[tuple[int, int]]) -> list[str]:
    """``elements`` with each atom of unknown element (``X``: a colour that is none of C, N, O) given the element
    its read name begins with (``S11``, ``CL2``) or, unnamed, the one its neighbours say: a P with three or more O
    (phosphate, phosphonate), an S with two O and two other neighbours (sulfonyl, sulfonamide) or with two neighbours
    and no O (thioether, thiazole, thiophene); a one-neighbour atom (a halogen of unknown kind) stays ``X``.

    Why: the atom detector tells only C, N and O apart, and an X is built as a carbon, so a thiazole's S made its ring
    a carbocycle and its N a tertiary amine (7l00's N24, the acceptor of ALA 95's N–H, lost)."""
    from misi_agent.tools.label_triangulation import element_of_name

    out = list(elements)
    nbrs = _neighbour_lists(bonds)
    for i, el in enumerate(elements):
        if el != "X":
            continue
        name = str(names[i]) if i < len(names) else ""
        named = CLASS_ELEMENT.get(element_of_name(name)) if name and not name.startswith("?") else None
        if named and named not in ("C", "N", "O"):  # a name says only what the colour could not
            out[i] = named
            continue
        nb = nbrs.get(i, [])
        n_o = sum(1 for j in nb if elements[j] == "O")
        if n_o >= 3:
            out[i] = "P"
        elif (n_o == 2 and len(nb) == 4) or (n_o == 0 and len(nb) == 2):
            out[i] = "S"
    return out


PO_BOND_A = 1.52  # Å (ours): a phosphate's P–O, between its terminal (≈ 1.50 Å) and ester (≈ 1.60 Å) bonds


def missing_phosphate_oxygens(elements: Sequence[str], coords: np.ndarray, bonds: Sequence[tuple[int, int]]
                              ) -> list[tuple[int, np.ndarray]]:
    """``(P index, position)`` for each substituent a ligand P lacks: every P of a ligand is a tetrahedral P(V)
    with four heavy neighbours (all 132 P of the 308 PoseBusters ligands' CCD definitions), and the pictures
    hide some of a phosphate's O under the others. A P with two or three neighbours in ``bonds`` gets the free
    tetrahedral positions at :data:`PO_BOND_A`; one with fewer has no determined position and gets none.

    Typing needs them: the H-bond rules (after IDATM) make a terminal O of a four-connected P with two or more
    terminal O a phosphate O⁻, an acceptor only; on a P short of neighbours the same O is a hydroxyl, a donor
    too, and gave Asp/Glu carboxylate O bonds the structure does not have (raster T9,
    ``eval/results/image_hbonds_residue_fit.md``)."""
    from misi_agent.tools.hydrogens import TETRAHEDRAL, bond_positions

    coords = np.asarray(coords, float)
    nb = _neighbour_lists(bonds)
    out = []
    for i, el in enumerate(elements):
        if el == "P" and len(nb.get(i, [])) in (2, 3):
            for x in bond_positions(tuple(coords[i]), TETRAHEDRAL, PO_BOND_A, [tuple(coords[j]) for j in nb[i]]):
                out.append((i, np.asarray(x, float)))
    return out


def ligand_molecule(elements: Sequence[str], coords: np.ndarray, bonds: Sequence[tuple[int, int]],
                    sigma: float = 0.0) -> tuple[Chem.Mol, str]:
    """An RDKit molecule of the ligand's heavy atoms with perceived hydrogens, bond orders and charges.

    Connectivity is ``bonds``; ``sigma`` (Å) is the coordinates' uncertainty, which widens the
    flatness tests. Each atom's hybridisation comes from its geometry: atoms of flat
    rings with short bonds are aromatic (sp2); a three-connected atom is sp2 when planar (angles
    summing to over 350°); a two-connected carbon is sp above 165°, sp2 when its angle opens past
    116° and one bond is short; an acyclic two-connected N is an imine only with a bond under
    1.31 Å (else an NH: amide, aniline); a terminal O, S, N or C with a short bond is a double-bond
    end. Atoms left short of valence are paired into double bonds by a maximum matching that
    prefers short bonds (a Kekulé structure); a terminal O left unpaired on C, P or S is O⁻.
    Bonds that would overfill an atom's valence are dropped first, longest first (:func:`valence_pruned`).
    Returns (mol, "perceived") or (mol, "connectivity") when sanitisation fails and only single
    bonds are kept.
    """
    n = len(elements)
    coords = np.asarray(coords, float)
    bonds = valence_pruned(elements, coords, bonds)
    rw = _single_bonded(elements, bonds)
    base = rw.GetMol()
    Chem.FastFindRings(base)
    flat = _planar_rings(base, coords, sigma)
    ring_atoms = {i for r in base.GetRingInfo().AtomRings() for i in r}
    nb = [[x.GetIdx() for x in base.GetAtomWithIdx(i).GetNeighbors()] for i in range(n)]

    def blen(i, j):
        return float(np.linalg.norm(coords[i] - coords[j]))

    deficit = np.zeros(n, int)
    for i, el in enumerate(elements):
        d = len(nb[i])
        val = VALENCE.get(el, 4)
        if el not in ("C", "N", "O", "S") or d >= val:
            continue
        sp2 = False
        if i in flat:
            sp2 = True
        elif d == 3:
            sp2 = sum(_angles(coords, i, nb[i])) > 350.0 - 40.0 * sigma
        elif d == 2:
            ang = _angles(coords, i, nb[i])[0]
            short = min(blen(i, j) for j in nb[i])
            if el == "C":
                if ang > 165:
                    deficit[i] = 2
                    continue
                sp2 = ang > 116.0 and short < 1.42
            elif el == "N":
                if ang > 165:
                    deficit[i] = 1
                    continue
                sp2 = short < 1.31 if i not in ring_atoms else ang > 112.0
        elif d == 1:
            j = nb[i][0]
            lim = {"O": 1.31, "S": 1.70, "N": 1.21, "C": 1.25}[el]
            if blen(i, j) < lim and elements[j] in ("C", "S", "P", "N"):
                sp2 = True
            if el == "N" and blen(i, j) < 1.20:
                deficit[i] = 2
                continue
        if sp2:
            deficit[i] = 1
    # double bonds: maximum matching over neighbouring atoms that both lack one bond, short bonds first
    g = nx.Graph()
    for a, b in bonds:
        if deficit[a] > 0 and deficit[b] > 0:
            g.add_edge(int(a), int(b), weight=max(0.05, 2.0 - blen(int(a), int(b))))
    matching = nx.max_weight_matching(g, maxcardinality=True)
    for a, b in matching:
        rw.GetBondBetweenAtoms(a, b).SetBondType(Chem.BondType.DOUBLE)
        deficit[a] -= 1
        deficit[b] -= 1
    # P=O / S=O: terminal O on P or hypervalent S
    for i, el in enumerate(elements):
        if el in ("P", "S") and len(nb[i]) >= 3:
            terminal_o = [j for j in nb[i] if elements[j] == "O" and len(nb[j]) == 1]
            for j in terminal_o[: (1 if el == "P" else 2)]:
                rw.GetBondBetweenAtoms(i, j).SetBondType(Chem.BondType.DOUBLE)
                deficit[j] = 0
    for i, el in enumerate(elements):
        atom = rw.GetAtomWithIdx(i)
        if deficit[i] > 0 and el == "O" and len(nb[i]) == 1 and elements[nb[i][0]] in ("C", "P", "S"):
            atom.SetFormalCharge(-1)  # carboxylate/phosphate O left without a double bond
        atom.SetNoImplicit(False)
    mol = rw.GetMol()
    try:
        Chem.SanitizeMol(mol)
        return mol, "perceived"
    except Exception:
        m2 = _single_bonded(elements, bonds).GetMol()
        try:
            Chem.SanitizeMol(m2)
        except Exception:
            m2.UpdatePropertyCache(strict=False)
        return m2, "connectivity"
