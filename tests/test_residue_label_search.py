"""Residue labels found in 3D where PyMOL piles them (tools/residue_label_search.py).

End to end on 6yqw's six PyMOL pictures at 512 px (its T9 item): Phe 44, whose backbone O accepts an H-bond from the
ligand, has its label read in fewer than two views; the search finds ``PHE 44`` at its CA, and the texts it finds are
mostly right (measured: 32 found, 31 at their own residue's CA; the other, ``THR 99`` at 0.70, at no residue's CA).
Gold is the scene (residue label texts and their front-frame anchors, the CAs).
"""
from __future__ import annotations

import re
import numpy as np
import pytest


@pytest.fixture(scope="module")
def pymol_6yqw(pymol_6yqw_labelled):
    rec, labels, sp, front, to_true, _ = pymol_6yqw_labelled
    cas = {text: np.asarray(at, float) for text, at in front.labels() if re.fullmatch(r"[A-Z]{3} -?\d+", text)}
    return rec, labels, sp, cas, to_true


def test_a_residue_label_hidden_in_the_piles_is_found_at_its_ca(pymol_6yqw):
    from misi_agent.tools.label_spotting import read_views
    from misi_agent.tools.residue_label_search import searched_residue_labels

    rec, labels, sp, cas, to_true = pymol_6yqw
    assert len(read_views(labels).get("PHE 44", ())) < 2
    found = searched_residue_labels(rec, labels, sp)
    by_text = {p.text: p for p in found}
    assert "PHE 44" in by_text
    assert np.linalg.norm(to_true(by_text["PHE 44"].coords) - cas["PHE 44"]) < 1.0
    right = [p for p in found if p.text in cas and np.linalg.norm(to_true(p.coords) - cas[p.text]) < 1.0]
    assert len(found) >= 20 and len(right) >= 0.85 * len(found), [(p.text, p.score) for p in found]
    texts = [p.text for p in found]
    assert len(texts) == len(set(texts))
    for a in found:  # two labels are never taken at one place
        assert all(np.linalg.norm(a.coords - b.coords) >= 3.0 for b in found if b is not a)


def test_found_labels_are_added_as_reads_where_fewer_than_two_views_read_them(pymol_6yqw):
    from misi_agent.tools.label_spotting import read_views
    from misi_agent.tools.label_triangulation import residue_label_points
    from misi_agent.tools.residue_label_search import with_searched_residue_labels

    rec, labels, sp, cas, to_true = pymol_6yqw
    before = read_views(labels)
    out = with_searched_residue_labels(rec, labels, sp)
    after = read_views(out)
    assert len(after["PHE 44"]) >= 2
    for text, views in before.items():
        if len(views) >= 2:
            assert after[text] == views, text  # texts read in two or more views are left as read
    point = residue_label_points(rec, out, r"PHE 44")["PHE 44"]
    assert np.linalg.norm(to_true(point.coords) - cas["PHE 44"]) < 1.0


def test_a_residue_number_is_read_at_its_ca(pymol_6yqw):
    """The label drawn at a residue's CA names its number when the residue's name is known (``number_at``): Phe 44,
    whose label the reader misses, is read there; a number the true one begins (``PHE 4`` inside ``PHE 44``) is not
    taken; across the residues whose number lies among those worth trying, the texts kept are their own (measured:
    all 44; the best-scoring text alone, without the extension, is the true one cut short for 25)."""
    from misi_agent.tools.label_spotting import nearby_numbers
    from misi_agent.tools.residue_label_search import MIN_TEXT, number_at

    rec, labels, sp, cas, to_true = pymol_6yqw
    origin = to_true(np.zeros(3))
    scale = (to_true(np.array([1.0, 0.0, 0.0])) - origin)[0]
    at = lambda true: (np.asarray(true, float) - origin) / scale  # noqa: E731  the true CA in the rebuilt frame
    numbers = sorted(n for n in nearby_numbers(labels) if n >= 0)
    found = number_at(rec, sp, "PHE", at(cas["PHE 44"]), numbers)
    assert found is not None and found.text == "PHE 44" and found.score >= MIN_TEXT
    assert number_at(rec, sp, "PHE", at(cas["PHE 44"]), [4, 44]).text == "PHE 44"
    kept = {text: number_at(rec, sp, text.split()[0], at(ca), numbers) for text, ca in sorted(cas.items())
            if int(text.split()[1]) in numbers}
    right = [t for t, f in kept.items() if f is not None and f.text == t]
    wrong = [(t, f.text) for t, f in kept.items() if f is not None and f.text != t]
    assert len(kept) >= 20 and len(right) >= 0.9 * len(kept) and len(wrong) <= 0.05 * len(kept), (right, wrong)
    assert number_at(rec, sp, "TRP", at(cas["PHE 44"]), numbers) is None  # another name's text is not there


def test_a_residue_whose_bonds_go_unnamed_takes_the_number_at_its_ca(pymol_6yqw):
    """``numbered_at_labels`` numbers only the residues whose number no label gave and whose bonds the answer would
    leave out: a Phe at Phe 44's CA with such a bond becomes ``PHE 44``; the same residue without a bond, and a read
    residue, are left as they are."""
    from types import SimpleNamespace

    from misi_agent.tools.identity import ResidueIdentity
    from misi_agent.tools.image_hbonds import complex_numbers, numbered_at_labels

    rec, labels, sp, cas, to_true = pymol_6yqw
    origin = to_true(np.zeros(3))
    scale = (to_true(np.array([1.0, 0.0, 0.0])) - origin)[0]
    ca = tuple((cas["PHE 44"] - origin) / scale)
    far = tuple((cas["TYR 57"] - origin) / scale)
    lost = ResidueIdentity(7, (), "PHE", None, "", {}, 0.0, "graph", "none", completed={"CA": ca})
    read = ResidueIdentity(8, (), "TYR", 57, "", {}, 0.0, "ocr", "ocr", completed={"CA": far})
    number = complex_numbers([lost, read])[0]
    bond = SimpleNamespace(residue_number=number, ligand_atom="O1")
    out = numbered_at_labels(rec, [lost, read], [bond], labels, sp)
    assert (out[0].name, out[0].number, out[0].number_source) == ("PHE", 44, "label")
    assert out[1] is read
    assert numbered_at_labels(rec, [lost, read], [], labels, sp)[0] is lost  # no bond to write: not read
