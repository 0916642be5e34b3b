"""The ligand's chemical component found by spotting its atom names (tools/component_spotting.py).

Unit level: the geometric check on real Chemical Component Dictionary entries (a component's own atoms agree with
its ideal distances; a rival that shares many of its names does not). End to end: 6z1c's 7EY on PyMOL's six
pictures, where the reconstruction rebuilds part of the ligand under its labels; among the components the read names
shortlist, 7EY is the one whose names are spotted where its geometry puts them, and its atoms are placed near the
true ones. Gold is the scene (atom names and front-frame coordinates).
"""
from __future__ import annotations

import numpy as np

from misi_agent.structure import ccd_template
from misi_agent.tools.component_spotting import (MIN_SPOTTED_SHARE, agreeing_names, component_from_points,
                                                 spotted_component)
from misi_agent.tools.label_triangulation import LabelPoint


def _agreeing(code: str, points: dict[str, LabelPoint]) -> list[str]:
    t = ccd_template(code)
    return agreeing_names([str(n) for n in t.atom_name], np.asarray(t.coord, float),
                          [(int(a), int(b)) for a, b, _ in t.bonds.as_array()], points)


def test_a_rival_sharing_names_does_not_agree_with_the_drawn_components_geometry():
    """VQP's atoms (ideal coordinates, 0.15 Å of noise each coordinate) as the spotted points: all 32 agree with VQP's
    own distances; D6I, NJX and 29Y hold 17–22 of the same names, but their chemistry puts them elsewhere: no more
    than 13 agree (measured 13, 12, 8), and as the candidates are weighed (agreeing atoms less half of each other atom)
    each rival stays far behind VQP (at most 5 against 32)."""
    rng = np.random.default_rng(0)
    t = ccd_template("VQP")
    coords = np.asarray(t.coord, float)
    points = {str(n): LabelPoint(str(n), coords[k] + rng.normal(0.0, 0.15, 3), ("front", "left"), 0.0)
              for k, n in enumerate(t.atom_name)}
    assert len(_agreeing("VQP", points)) == 32
    for rival in ("D6I", "NJX", "29Y"):
        names = [str(n) for n in ccd_template(rival).atom_name]
        shared = sum(n in points for n in names)
        good = _agreeing(rival, points)
        assert shared >= 17 and len(good) <= 13, (rival, good)
        assert len(good) - 0.5 * (len(names) - len(good)) <= 5


def test_a_rebuilt_atom_the_labels_did_not_place_keeps_its_place_and_name():
    """DHR (7zf0's ligand) with its atoms placed at their label points but O1, whose label was not placed; the rebuilt
    ligand holds O1 where the pictures show it and a carbon on top of the point C1 (the same atom). Mapped with the
    rebuilt atoms, O1 is an atom seen in the pictures, at its rebuilt place (its H-bond is reported); without them it
    is placed from the ideal geometry and counted as hidden. The rebuilt carbon on C1 does not make a second C1."""
    t = ccd_template("DHR")
    names = [str(n) for n in t.atom_name]
    ideal = np.asarray(t.coord, float)
    points = {n: LabelPoint(n, ideal[k], ("front", "left"), 0.0) for k, n in enumerate(names) if n != "O1"}
    o1 = ideal[names.index("O1")] + [0.3, 0.0, 0.0]
    rebuilt = (["O", "C"], np.array([o1, ideal[names.index("C1")] + [0.2, 0.0, 0.0]]), ["O1", "C1"], [])

    alone = component_from_points("DHR", points)
    both = component_from_points("DHR", points, rebuilt)
    k = names.index("O1")
    assert alone is not None and alone.seen[k] < 0
    assert both is not None and both.seen[k] >= 0 and np.allclose(both.coords[k], o1)
    assert list(both.names).count("C1") == 1 and np.allclose(both.coords[names.index("C1")], ideal[names.index("C1")])
    assert component_from_points("DHR", {}) is None


def test_a_read_name_the_spotted_atoms_contradict_is_not_an_anchor():
    """DHR with O1 not placed by its label; the rebuilt ligand holds an O read as ``O1`` 2.2 Å from O1's true place
    (as 7my1's ``O2A``). Its distances to O1's spotted neighbours within two bonds disagree with DHR's, so the reading
    is set aside: the point is not taken for O1, O1 is placed from the other atoms, within 0.5 Å of its true place
    after the refinement of hidden atoms. Read at the right place, the same O is O1 and keeps its place."""
    t = ccd_template("DHR")
    names = [str(n) for n in t.atom_name]
    ideal = np.asarray(t.coord, float)
    k = names.index("O1")
    points = {n: LabelPoint(n, ideal[j], ("front", "left"), 0.0) for j, n in enumerate(names) if n != "O1"}
    off = ideal[k] + np.array([2.2, 0.0, 0.0])
    wrong = component_from_points("DHR", points, (["O"], off[None], ["O1"], []))
    assert wrong is not None and wrong.seen[k] < 0
    assert float(np.linalg.norm(wrong.coords[k] - ideal[k])) < 0.5
    right = component_from_points("DHR", points, (["O"], (ideal[k] + 0.2)[None], ["O1"], []))
    assert right is not None and right.seen[k] >= 0 and np.allclose(right.coords[k], ideal[k] + 0.2)


def test_the_drawn_component_is_the_one_whose_names_are_spotted_where_its_geometry_puts_them(pymol_6z1c_labelled):
    """6z1c on PyMOL's pictures at 512 px. The candidates are the read names' shortlist on this entry's T9 item
    (rank_components: 65H first, 7EY second). Spotting each one's names picks 7EY (measured: 10 of its 22 atoms placed
    where its geometry agrees, the rivals 4–5), and the placed atoms lie within 1.5 Å of the true ones."""
    rec, labels, sp, front, to_true, _ = pymol_6z1c_labelled

    match, how = spotted_component(rec, labels, sp, ["65H", "7EY", "IZ9", "2NY", "AX6", "JYQ"])
    assert match is not None and match.code == "7EY", how
    seen = np.flatnonzero(match.seen >= 0)
    assert len(seen) >= MIN_SPOTTED_SHARE * len(match.names)

    lig = np.flatnonzero(front.is_ligand)
    true = {str(front.atom_names[i]): front.coords[i] for i in lig}
    errors = [float(np.linalg.norm(to_true(match.coords[k]) - true[match.names[k]])) for k in seen]
    assert np.median(errors) < 0.6 and max(errors) < 1.5, errors

    none, why = spotted_component(rec, labels, sp, ["2NY", "AX6", "JYQ"])  # the drawn component is not a candidate
    assert none is None and "spotted" in why


def test_a_mostly_hidden_component_is_taken_on_the_points_that_agree_with_its_geometry():
    """7mgy's ligand ZD1 (23 heavy atoms) as PyMOL draws it: most of it under labels, 8 atoms of one connected part
    spotted (ideal coordinates, 0.15 Å of noise each coordinate). All 8 agree with ZD1's own distances, and the
    candidate is taken (8 of 23 is 35 %: the earlier 40 % share turned the entry's component away on 10 of the 50
    PyMOL T9 test items). Fewer than MIN_ANCHORS agreeing points, or a large component resting on a few (6 of 40),
    are not taken."""
    import networkx as nx

    from misi_agent.tools.component_spotting import enough_spotted
    from misi_agent.tools.ligand_dictionary import MIN_ANCHORS

    rng = np.random.default_rng(0)
    t = ccd_template("ZD1")
    names = [str(n) for n in t.atom_name]
    coords = np.asarray(t.coord, float)
    g = nx.Graph([(int(a), int(b)) for a, b, _ in t.bonds.as_array()])
    part = list(nx.bfs_tree(g, 0))[:8]
    points = {names[k]: LabelPoint(names[k], coords[k] + rng.normal(0.0, 0.15, 3), ("front", "left"), 0.0)
              for k in part}
    good = _agreeing("ZD1", points)
    assert len(names) == 23 and len(good) == 8
    assert enough_spotted(len(good), len(names)) and len(good) < 0.4 * len(names)
    assert not enough_spotted(MIN_ANCHORS - 1, 12)
    assert not enough_spotted(6, 40)
