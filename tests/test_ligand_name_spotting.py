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
from misi_agent.tools.ligand_name_spotting import MIN_CHECKED_SHARE, spotted_ligand_names
from render_support import six_views

DATA = Path(__file__).resolve().parent.parent / "misi_agent" / "data" / "structures"


def _named(renderer: str):
    cx = load_complex(DATA / "6yqw.cif.gz", ligand="82I")
    scenes, images = six_views(cx, renderer)
    labels = {v: read_labels(im) for v, im in images.items()}
    rec = oracle_reconstruction(cx)
    voted = identify_ligand(rec, labels)
    checked, info = spotted_ligand_names(rec, labels, spotters(images, labels), voted)
    lig = np.flatnonzero(scenes["front"].is_ligand)
    gold = {int(i): str(scenes["front"].atom_names[i]) for i in lig}
    right = {name: sum(ident.names.get(i) == g for i, g in gold.items()) for name, ident in
             (("voted", voted), ("checked", checked))}
    return right, info, len(gold)


@pytest.fixture(scope="module")
def pymol_named():
    return _named("pymol")


def test_pymol_names_checked_at_their_atoms_beat_the_pile_reading(pymol_named):
    """PyMOL: nearly every atom's name checks at its place, the checked names are used, and more of them are right
    than the reader's votes from the pile."""
    right, info, n = pymol_named
    assert info["used"] == 1.0 and info["checked"] >= MIN_CHECKED_SHARE * n
    assert right["checked"] >= right["voted"] + 3, right
    assert right["checked"] >= 0.6 * n, right


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
