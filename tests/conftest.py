"""Fixtures shared by test modules: costly pictures drawn and reconstructed once per test session."""
from __future__ import annotations

from pathlib import Path

import pytest

import misi_agent  # noqa: F401  (before the test modules load numpy: pins OpenBLAS's kernel, reproducibility.py)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "structures"


def _labelled_pymol(entry: str, code: str):
    """A shared PoseBusters entry in PyMOL's six views at 512 px, reconstructed as the T9 pipeline starts
    (:func:`render_support.labelled_reconstruction`), with the scale ruled by its residue labels."""
    from misi_agent.structure import load_complex
    from misi_agent.tools.label_triangulation import scale_ruled_by_labels
    from render_support import labelled_reconstruction

    path = SHARED / "posebusters" / f"{entry}.cif.gz"
    if not path.is_file():
        pytest.skip("the shared PoseBusters structures are not here")
    out = labelled_reconstruction(load_complex(path, ligand=code), "pymol")
    assert scale_ruled_by_labels(out[0])
    return out


@pytest.fixture(scope="session")
def pymol_6yqw_labelled():
    """6yqw (ligand 82I, its T9 item) in PyMOL's six views at 512 px, reconstructed with its labels read and the
    scale ruled by the residue labels (:func:`render_support.labelled_reconstruction`)."""
    return _labelled_pymol("6yqw", "82I")


@pytest.fixture(scope="session")
def pymol_6z1c_labelled():
    """6z1c (ligand 7EY) in PyMOL's six views at 512 px, reconstructed as :func:`pymol_6yqw_labelled`: its ligand's
    N/O names are read where the rebuilt ligand lacks their atoms."""
    return _labelled_pymol("6z1c", "7EY")


def pytest_collection_modifyitems(config, items):
    """The notebooks first: executing them is the longest test (the image-grounding notebook, about four minutes),
    and with the tests spread over worker processes (``-n 2``) a long test collected last holds the run open after
    the other worker has finished."""
    items.sort(key=lambda item: item.nodeid.split("::")[0] != "tests/test_notebooks.py")
