"""The pictured ligand's chemical component chosen by spotting every one of its atom names in the views.

Why: where a renderer draws each ligand atom's name centred on the atom (PyMOL), a ligand of 10–57 atoms lies under
its own names and the pocket's residue labels. The reconstruction rebuilds 5–23 of its atoms, named by fragments
read out of the pile, and :func:`~misi_agent.tools.ligand_dictionary.identify_component` finds the component on
6 of 20 PyMOL T9 test items (right on 4). But a component's atom names are known once it is a candidate, and a name
known in advance can be *spotted* where it cannot be read: each of the candidate's names is looked for in every view
with the item's own glyph templates and triangulated where two or more views agree
(:func:`~misi_agent.tools.label_triangulation.text_point`). With the right component this places 4–25 of a
ligand's 8–57 atoms, most within 1 Å (median error 0.1–0.7 Å an item, 20 PyMOL T9 items, the truth read only to
measure). A wrong candidate shares generic names (``C1``, ``O2``) with the drawn ligand, and those are spotted too,
but where its own chemistry does not put them: so a spotted point counts only when its spotted neighbours within two
bonds lie at the component's ideal distances from it (:data:`AGREE_A`), and the candidate with the most such
points, less half an atom for each of its atoms that has none (as
:func:`~misi_agent.tools.ligand_dictionary.match_quality` weighs a mapping), is taken when those points are at least
:data:`~misi_agent.tools.ligand_dictionary.MIN_ANCHORS` and :data:`MIN_SPOTTED_SHARE` of its atoms. Its other atoms
are placed by :func:`~misi_agent.tools.ligand_dictionary.map_to_component` from the spotted ones and refined to the
component's short-range geometry (:func:`~misi_agent.tools.ligand_dictionary.with_refined_hidden_atoms`).

Only for renderers that draw labels at their atoms (the caller checks: the residue labels ruled the Å scale,
:func:`~misi_agent.tools.label_triangulation.scale_ruled_by_labels`); a renderer that moves labels aside (raster)
gives no points at the atoms. Measured: ``eval/results/image_hbonds.md`` (forty-fourth session).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from misi_agent.tools.label_triangulation import LabelPoint, text_places, text_point
from misi_agent.tools.ligand_dictionary import (MIN_ANCHORS, ComponentMatch, map_to_component,
                                                with_refined_hidden_atoms)

AGREE_A = 0.5  # Å: a spotted pair within two bonds agrees when its distance is this close to the ideal one
MIN_SPOTTED_SHARE = 0.2  # share of a component's atoms that must be spotted where its geometry allows (see
# enough_spotted: 0.4 until the fifty-fifth session)
SAME_ATOM_A = 1.0  # Å: a rebuilt atom this close to a spotted point is that atom (the point is the better placed)
CHECK_BONDS = 2  # pairs this many bonds apart or fewer have a distance that does not depend on the conformation


def spotted_points(rec, labels: Mapping[str, Any], spotters: Mapping[str, Mapping[str, Any]], names: Sequence[str],
                   offset: np.ndarray) -> dict[str, LabelPoint]:
    """Each of ``names`` placed where its ligand labels (read, else spotted) meet in two or more views, labels
    drawn ``offset`` px from their atoms; names placed nowhere are left out."""
    out = {}
    for name in names:
        point = text_point(rec, text_places(labels, spotters, "ligand", name), offset, name)
        if point is not None:
            out[name] = point
    return out


def agreeing_names(names: Sequence[str], ideal: np.ndarray, bonds: Sequence[tuple[int, int]],
                   points: Mapping[str, LabelPoint], agree_a: float = AGREE_A) -> list[str]:
    """The spotted names (a component's ``names`` with ``ideal`` coordinates and ``bonds`` by index) whose spotted
    neighbours within :data:`CHECK_BONDS` bonds lie at the ideal distance (within ``agree_a``) more often than not:
    bond lengths and angles fix those distances whatever the torsions."""
    near = _within_check_bonds(len(names), bonds)
    out = []
    for k, name in enumerate(names):
        if name in points:
            agree, disagree = _agreement(k, points[name].coords, names, ideal, near, points, agree_a)
            if agree > disagree:
                out.append(name)
    return out


def _within_check_bonds(n: int, bonds: Sequence[tuple[int, int]]) -> dict[int, dict[int, int]]:
    """For each of ``n`` atoms, the atoms within :data:`CHECK_BONDS` bonds of it (``bonds`` by index)."""
    import networkx as nx

    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from((int(a), int(b)) for a, b in bonds)
    return dict(nx.all_pairs_shortest_path_length(g, cutoff=CHECK_BONDS))


def _agreement(k: int, at: np.ndarray, names: Sequence[str], ideal: np.ndarray, near: Mapping[int, Mapping[int, int]],
               points: Mapping[str, LabelPoint], agree_a: float = AGREE_A) -> tuple[int, int]:
    """How many of the spotted atoms within :data:`CHECK_BONDS` bonds of component atom ``k`` (put ``at``) lie at
    their ideal distance from it (within ``agree_a``), and how many do not."""
    agree = disagree = 0
    for j, other in enumerate(names):
        if j == k or other not in points or j not in near.get(k, {}):
            continue
        seen = float(np.linalg.norm(np.asarray(at, float) - points[other].coords))
        if abs(seen - float(np.linalg.norm(ideal[k] - ideal[j]))) < agree_a:
            agree += 1
        else:
            disagree += 1
    return agree, disagree


def spotted_component(rec, labels: Mapping[str, Any], spotters: Mapping[str, Mapping[str, Any]],
                      codes: Sequence[str], rebuilt: tuple[Sequence[str], np.ndarray, Sequence[str],
                                                           Sequence[tuple[int, int]]] | None = None
                      ) -> tuple[ComponentMatch | None, str]:
    """The candidate component (of ``codes``) whose atom names the views show where its geometry puts them, mapped
    from those points and the ``rebuilt`` ligand atoms (:func:`component_from_points`), and a line saying what was
    found; (None, why) when no candidate qualifies (see the module's docstring)."""
    from misi_agent.structure import ccd_template
    from misi_agent.tools.ligand_name_spotting import ligand_label_offset

    offset, _ = ligand_label_offset(rec, labels, spotters)
    placed: dict[str, LabelPoint | None] = {}  # each name spotted once: candidates share many (C1, O2, N1)
    best: tuple[float, str, dict[str, LabelPoint], Any] | None = None
    for code in codes:
        t = ccd_template(code)
        if t is None or t.bonds is None or t.array_length() == 0 or not np.isfinite(t.coord).all():
            continue
        names = [str(n) for n in t.atom_name]
        new = [n for n in names if n not in placed]
        found = spotted_points(rec, labels, spotters, new, offset)
        placed.update({n: found.get(n) for n in new})
        points = {n: placed[n] for n in names if placed[n] is not None}
        good = agreeing_names(names, np.asarray(t.coord, float), [(int(a), int(b)) for a, b, _ in t.bonds.as_array()],
                              points)
        quality = len(good) - 0.5 * (len(names) - len(good))
        if best is None or quality > best[0]:
            best = (quality, code, {n: points[n] for n in good}, t)
    if best is None:
        return None, "no candidate component has ideal coordinates"
    _, code, points, t = best
    names = [str(x) for x in t.atom_name]
    if not enough_spotted(len(points), len(names)):
        return None, (f"best candidate {code}: {len(points)} of {len(names)} atom names spotted where its geometry "
                      f"puts them")
    match = component_from_points(code, points, rebuilt)
    if match is None:
        return None, f"component {code} spotted but not mapped"
    return match, f"{len(points)} of its {len(names)} atom names spotted where its geometry puts them"


def enough_spotted(agreeing: int, atoms: int) -> bool:
    """Whether a candidate with ``agreeing`` names spotted where its geometry puts them, of its ``atoms`` atoms, is
    taken: :data:`~misi_agent.tools.ligand_dictionary.MIN_ANCHORS` such points and :data:`MIN_SPOTTED_SHARE` of its
    atoms.

    Why so low a share: the agreement check (spotted neighbours within two bonds at the component's ideal distances)
    is what rejects a wrong candidate; the share only guards against a large component resting on a few points.
    PyMOL hides most of a ligand under its labels (a median third of its atoms is drawn), and at 0.4 the share turned
    away the entry's own component on 10 of the 50 PyMOL T9 test items (6–13 agreeing points, 21–38 % of its atoms:
    6m2b's EZO, 7kc5's BJZ, 7mgy's ZD1, 7vyj's CA0, ...), where the read names' dictionary lookup then found none or a
    wrong one. At 0.2 the chosen component is the entry's on 10 more of those 50 items and on 2 more of 20 training
    items, none fewer; two items where none was found take a near-isomer (7km8's H6O for WPD, 8g0v's YHK for YHT), one
    a wrong component for another (7mgt's DP6 for 0G8; the entry's is ZD4). PyMOL T9, answers replayed on the
    captured complexes: 50 test items 38.66 → 39.69, 20 training items one answer lower by 0.5 (7n4w: its right
    component adds one bond to an answer that held every true one); ``eval/results/image_hbonds.md``."""
    return agreeing >= MIN_ANCHORS and agreeing >= MIN_SPOTTED_SHARE * atoms


def component_from_points(code: str, points: Mapping[str, LabelPoint],
                          rebuilt: tuple[Sequence[str], np.ndarray, Sequence[str], Sequence[tuple[int, int]]] | None
                          = None) -> ComponentMatch | None:
    """Component ``code`` mapped (:func:`~misi_agent.tools.ligand_dictionary.map_to_component`) from its atoms placed
    at ``points`` (name -> point) and the ``rebuilt`` ligand atoms (elements, coordinates, read names, bonds by index):
    a rebuilt atom farther than :data:`SAME_ATOM_A` from every point is an anchor where its read name is the
    component's and no point holds it, and takes a placed atom's name where it falls on it, as in the dictionary
    lookup (an O the labels did not place but the pictures show, 7zf0's O1, keeps its place and name: T9 0.5 → 1 on
    that item). A rebuilt atom's read name counts only where the spotted atoms within :data:`CHECK_BONDS` bonds of
    its atom lie at the component's distances from it at least as often as not (7my1's ``O2A`` read on a point
    2.2 Å from the true one, which as an anchor dragged the hidden phosphate with it). The atoms the pictures hide
    are then refined to the component's short-range geometry
    (:func:`~misi_agent.tools.ligand_dictionary.with_refined_hidden_atoms`). None where the mapping fails (fewer
    than its minimum of anchors)."""
    from misi_agent.structure import ccd_template

    t = ccd_template(code)
    if t is None or t.bonds is None:
        return None
    names = [str(x) for x in t.atom_name]
    use = [k for k, nm in enumerate(names) if nm in points]
    if not use:
        return None
    at = {k: j for j, k in enumerate(use)}
    bonds = [(at[int(a)], at[int(b)]) for a, b, _ in t.bonds.as_array() if int(a) in at and int(b) in at]
    elements = [str(t.element[k]).upper() for k in use]
    xyz = [points[names[k]].coords for k in use]
    given = [names[k] for k in use]
    if rebuilt is not None and len(rebuilt[0]):
        r_el, r_xyz, r_names, r_bonds = rebuilt
        r_xyz = np.asarray(r_xyz, float)
        apart = np.linalg.norm(r_xyz[:, None] - np.array(xyz)[None], axis=2).min(axis=1) > SAME_ATOM_A
        keep = {int(i): len(given) + j for j, i in enumerate(np.flatnonzero(apart))}
        tpos = {n: k for k, n in enumerate(names)}
        ideal = np.asarray(t.coord, float)
        near = _within_check_bonds(len(names), [(int(a), int(b)) for a, b, _ in t.bonds.as_array()])
        for i in keep:
            elements.append(str(r_el[i]).upper())
            xyz.append(r_xyz[i])
            name = str(r_names[i])
            if name in tpos and name not in points:  # a read name the spotted atoms contradict is a misreading
                agree, disagree = _agreement(tpos[name], r_xyz[i], names, ideal, near, points)
                name = name if disagree <= agree else "?"
            given.append("?" if name in points else name)  # a name the points hold is theirs
        bonds += [(keep[a], keep[b]) for a, b in r_bonds if a in keep and b in keep]
    match = map_to_component(code, elements, np.array(xyz), given, bonds)
    return None if match is None else with_refined_hidden_atoms(match)
