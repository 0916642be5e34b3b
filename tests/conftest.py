"""Fixtures shared by test modules: costly pictures drawn and reconstructed once per test session."""
from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "structures"


@pytest.fixture(scope="session")
def pymol_6yqw_labelled():
    """6yqw (ligand 82I, its T9 item) in PyMOL's six views at 512 px, reconstructed with its labels read and the
    scale ruled by the residue labels (:func:`render_support.labelled_reconstruction`)."""
    from misi_agent.structure import load_complex
    from misi_agent.tools.label_triangulation import scale_ruled_by_labels
    from render_support import labelled_reconstruction

    path = SHARED / "posebusters" / "6yqw.cif.gz"
    if not path.is_file():
        pytest.skip("the shared PoseBusters structures are not here")
    out = labelled_reconstruction(load_complex(path, ligand="82I"), "pymol")
    assert scale_ruled_by_labels(out[0])
    return out
