"""Ligand N/O names found in 3D where PyMOL hides their atoms (tools/ligand_name_search.py).

End to end on 6yqw's six PyMOL pictures at 512 px (its T9 item, ligand 82I): the reader places only ``C12`` and
``CL1`` from their labels, the reconstruction rebuilds 9 of the ligand's 12 atoms, and N05, whose H-bond to the pocket
is one of the item's gold bonds, is among the atoms whose names no read places. The search finds N05 at its atom
(measured: O17, N11, N10 and N05 found, each within 0.18 Å of its atom). Gold is the scene (the ligand atoms' names
and front-frame positions, which are their labels' anchors).
"""
from __future__ import annotations

import re
import numpy as np
import pytest


@pytest.fixture(scope="module")
def pymol_6yqw(pymol_6yqw_labelled):
    rec, labels, sp, front, to_true, _ = pymol_6yqw_labelled
    atoms = {text: np.asarray(at, float) for text, at in front.labels() if not re.fullmatch(r"[A-Z]{3} -?\d+", text)}
    return rec, labels, sp, atoms, to_true


def test_a_hidden_ligand_nitrogen_is_found_at_its_atom(pymol_6yqw):
    from misi_agent.tools.label_triangulation import element_of_name, ligand_label_points
    from misi_agent.tools.ligand_name_search import searched_ligand_names
    from misi_agent.tools.ligand_name_spotting import ligand_label_offset

    rec, labels, sp, atoms, to_true = pymol_6yqw
    offset, n_pairs = ligand_label_offset(rec, labels, sp)
    assert n_pairs >= 1
    read = {p.text for p in ligand_label_points(rec, labels, sp, offset=offset)}
    assert "N05" not in read
    found = searched_ligand_names(rec, labels, sp, offset, skip=read)
    by_name = {p.text: p for p in found}
    assert "N05" in by_name
    assert np.linalg.norm(to_true(by_name["N05"].coords) - atoms["N05"]) < 0.5
    assert all(element_of_name(p.text) in ("N", "O") and p.text not in read for p in found)
    assert len(by_name) == len(found)
    right = [p for p in found if p.text in atoms and np.linalg.norm(to_true(p.coords) - atoms[p.text]) < 1.0]
    assert len(right) >= 3 and len(right) >= 0.75 * len(found), [p.text for p in found]
    for a in found:  # one name per place
        assert all(np.linalg.norm(a.coords - b.coords) >= 1.0 for b in found if b is not a)
    again = searched_ligand_names(rec, labels, sp, offset, skip=read | {"N05"})
    assert "N05" not in {p.text for p in again}  # a name already placed is not sought again


def test_candidate_names_take_atom_like_reads_and_leave_fragments_out():
    from misi_agent.tools.label_reading import Glyph, ImageLabels, LabelRead
    from misi_agent.tools.ligand_name_search import candidate_names

    names = set(candidate_names({}))
    assert {"N05", "O1A", "O2'", "OP1", "O1P", "OAB", "C60"} <= names
    assert not {"NC", "N0", "O"} & names

    def read(text: str) -> LabelRead:
        glyphs = tuple(Glyph((k, 0, k + 1, 1), np.zeros(1), fixed=c) for k, c in enumerate(text))
        return LabelRead((glyphs,), (0, 0, len(text), 1), 0, "ligand")

    names = set(candidate_names({"front": ImageLabels((read("NC"), read("O3G"), read("N0")))}))
    assert "O3G" in names and "NC" not in names and "N0" not in names
