"""Ligand atom names checked at each atom's label place (tools/ligand_name_spotting.py), on real renderings of 6yqw.

The atoms are the true ones projected into the views (``oracle_reconstruction``), so what is measured is the naming
alone; gold is the ligand's own atom names (what the scene draws). PyMOL centres every name just above its atom and
the names of the 11-atom ligand 82I pile up; the raster renderer moves labels apart, and the reader reads them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from misi_agent.structure import load_complex
from misi_agent.tools.identity import identify_ligand
from misi_agent.tools.image_hbonds import oracle_reconstruction
from misi_agent.tools.label_reading import read_labels
from misi_agent.tools.label_spotting import spotters
from misi_agent.tools.ligand_name_spotting import (MIN_CHECKED_SHARE, checked_offset, ligand_label_offset,
                                                   spotted_ligand_names)
from render_support import six_views

DATA = Path(__file__).resolve().parent.parent / "misi_agent" / "data" / "structures"


def _pictured(renderer: str):
    cx = load_complex(DATA / "6yqw.cif.gz", ligand="82I")
    scenes, images = six_views(cx, renderer)
    labels = {v: read_labels(im) for v, im in images.items()}
    return scenes, images, labels, oracle_reconstruction(cx)


def _named(renderer: str, pictured=None):
    scenes, images, labels, rec = pictured or _pictured(renderer)
    voted = identify_ligand(rec, labels)
    checked, info = spotted_ligand_names(rec, labels, spotters(images, labels), voted)
    lig = np.flatnonzero(scenes["front"].is_ligand)
    gold = {int(i): str(scenes["front"].atom_names[i]) for i in lig}
    right = {name: sum(ident.names.get(i) == g for i, g in gold.items()) for name, ident in
             (("voted", voted), ("checked", checked))}
    return right, info, len(gold)


@pytest.fixture(scope="module")
def pymol_pictured():
    return _pictured("pymol")


@pytest.fixture(scope="module")
def pymol_named(pymol_pictured):
    return _named("pymol", pymol_pictured)


def test_pymol_names_checked_at_their_atoms_beat_the_pile_reading(pymol_named):
    """PyMOL: nearly every atom's name checks at its place, the checked names are used, and more of them are right
    than the reader's votes from the pile."""
    right, info, n = pymol_named
    assert info["used"] == 1.0 and info["checked"] >= MIN_CHECKED_SHARE * n
    assert right["checked"] >= right["voted"] + 3, right
    assert right["checked"] >= n - 1, right  # 9 of 11 without LENGTH_BONUS


def test_raster_names_read_beside_their_atoms_are_kept():
    """Raster: labels are moved off their atoms, few names check at the atoms' places, and the names read stay."""
    right, info, n = _named("raster")
    assert info["used"] == 0.0 and info["checked"] < MIN_CHECKED_SHARE * n
    assert right["checked"] == right["voted"] >= n - 1, right


def test_a_text_checked_at_its_place_scores_as_at_that_place():
    """``Spotter.scores_near`` with no reach is ``Spotter.score_at``; a reach can only raise it; −1 off the
    picture."""
    cx = load_complex(DATA / "6yqw.cif.gz", ligand="82I")
    _, images = six_views(cx, "raster")
    labels = {v: read_labels(im) for v, im in images.items()}
    sp = spotters(images, labels)["front"]["residue"]
    lay = sp.layout("ASN 100")
    ii, jj = np.array([40, 200, 300, 9999]), np.array([50, 100, 250, 10])
    at = sp.scores_near(lay, ii, jj, 0)
    assert np.allclose(at[:3], [sp.score_at(lay, i, j) for i, j in zip(ii[:3], jj[:3])], atol=1e-5)
    assert at[3] == -1.0
    assert np.all(sp.scores_near(lay, ii, jj, 2)[:3] >= at[:3])


def _read_offset_truth(scenes, images, labels) -> np.ndarray:
    """Where PyMOL drew the ligand's labels from their atoms: the median of (label centre − the atom's projection)
    over the labels read as exactly one of the ligand's names (gold, to measure against)."""
    from misi_agent.camera import Camera

    offs = []
    for v, labs in labels.items():
        sc = scenes[v]
        lig = np.flatnonzero(sc.is_ligand)
        names = np.array([str(sc.atom_names[i]) for i in lig])
        h, w = np.asarray(images[v]).shape[:2]
        xy = Camera(w, h).project(np.asarray(sc.coords, float))[0][lig]
        for lab in labs.of_kind("ligand"):
            hit = np.flatnonzero(names == str(lab.text).strip().upper())
            if len(hit) == 1 and len(names[hit[0]]) >= 2:
                offs.append(np.asarray(lab.centre, float) - xy[hit[0]])
    assert len(offs) >= 5
    return np.median(np.array(offs), axis=0)


def test_pymol_label_offset_found_by_checking_names_at_every_offset(pymol_pictured):
    """The offset at which the most atoms' element-and-number names check lies within 3 px of where the labels
    are drawn (a name is checked within REACH_PX plus its glyphs' slide of its place), with no read ligand label
    used; and the offset the names are checked at agrees."""
    scenes, images, labels, rec = pymol_pictured
    truth = _read_offset_truth(scenes, images, labels)
    sp = spotters(images, labels)
    found = checked_offset(rec, labels, sp)
    assert found is not None and np.hypot(*(found - truth)) <= 3.0, (found, truth)
    used, n_pairs = ligand_label_offset(rec, labels, sp)
    assert n_pairs >= 1 and np.hypot(*(used - truth)) <= 3.0, (used, truth)


def test_a_ligand_whose_names_neither_check_nor_were_read_is_left_as_it_is(pymol_pictured):
    """Names that check nowhere (the ligand's text checked on blank pictures) and no name read: nothing is taken
    and the identity comes back unchanged, instead of failing on an empty list of candidate names."""
    from misi_agent.tools.identity import LigandIdentity
    from misi_agent.tools.label_spotting import Spotter

    _, images, labels, rec = pymol_pictured
    lig = np.flatnonzero(np.asarray(rec.is_ligand, bool))
    blank = {v: {**kinds, "ligand": Spotter(np.zeros_like(kinds["ligand"].alpha), kinds["ligand"].t)}
             for v, kinds in spotters(images, labels).items() if "ligand" in kinds}
    unread = LigandIdentity({int(i): f"?C{int(i)}" for i in lig}, {int(i): 0.0 for i in lig}, 0)
    out, info = spotted_ligand_names(rec, labels, blank, unread)
    assert info["checked"] == 0.0 and info["used"] == 0.0 and out == unread
