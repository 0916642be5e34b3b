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
