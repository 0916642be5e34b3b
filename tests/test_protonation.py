"""Protonation as a tool: PDBFixer + OpenMM hydrogens for real pockets, validated."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from misi_agent.errors import MisiError
from misi_agent.structure import load_complex
from misi_agent.tools.hbonds import find_hbonds
from misi_agent.tools.protonation import ProtonationError, protonate_pocket, validate_protonated

DATA = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"


@pytest.fixture(scope="module")
def fmn():
    cx = load_complex(DATA / "1aku.pdb.gz")
    return cx, protonate_pocket(cx)


def test_every_pocket_atom_gets_plausible_hydrogens(fmn):
    cx, prot = fmn
    P = cx.pocket
    assert set(prot.hydrogens) == set(range(P.array_length()))
    # a protein has roughly one hydrogen per heavy atom
    assert 0.6 < prot.n_hydrogens / P.array_length() < 1.3
    for i, hs in prot.hydrogens.items():
        assert hs.shape[1] == 3 and len(hs) == len(prot.hydrogen_names[i])
        for h in hs:
            assert 0.9 < np.linalg.norm(h - P.coord[i]) < 1.4
    by_name = {}
    for i in range(P.array_length()):
        by_name.setdefault((str(P.res_name[i]), str(P.atom_name[i])), []).append(len(prot.hydrogens[i]))
    assert set(by_name[("ARG", "NE")]) == {1} and set(by_name[("ARG", "NH1")]) == {2}  # guanidinium
    assert set(by_name[("SER", "OG")]) == {1} and set(by_name[("THR", "OG1")]) == {1}
    assert set(by_name[("ASP", "OD1")]) == {0}  # deprotonated at pH 7
    assert set(by_name[("GLY", "CA")]) == {2}
    # Backbone N: one H, except proline. The pocket's first residue (TYR 8) is no chain end:
    # protonating the whole chain keeps it an amide, not an NH3+ terminus.
    assert cx.residues()[0].number == 8 and int(P.res_id[0]) == 8
    for i in range(P.array_length()):
        if str(P.atom_name[i]) == "N" and str(P.res_name[i]) != "PRO":
            assert len(prot.hydrogens[i]) == 1, (P.res_name[i], P.res_id[i])
        if str(P.atom_name[i]) in ("C", "O"):
            assert len(prot.hydrogens[i]) == 0


def test_protonation_is_deterministic_and_validated(fmn):
    cx, prot = fmn
    again = protonate_pocket(cx)
    assert np.array_equal(prot.coordinates(), again.coordinates())
    from rdkit import Chem
    mol = Chem.MolFromPDBBlock(prot.pdb_text, removeHs=False)
    assert mol is not None
    assert sum(1 for a in mol.GetAtoms() if a.GetSymbol() == "H") >= prot.n_hydrogens


def test_engine_uses_the_explicit_hydrogens(fmn):
    cx, prot = fmn
    bonds = find_hbonds(cx, explicit_h=prot.explicit_h())
    assert bonds
    for hb in bonds:
        if hb.donor == "protein":
            # every protein donor now has a hydrogen to measure H···A from
            assert hb.h_distance is not None
            hs = prot.hydrogens[hb.protein_index]
            best = min(np.linalg.norm(hs - cx.ligand.coord[hb.ligand_index], axis=1))
            assert best == pytest.approx(hb.h_distance, abs=1e-3)


def test_corrupted_structure_fails_with_one_line(tmp_path):
    """Two pocket atoms on top of each other: validation refuses the result."""
    lines = gzip.decompress((DATA / "1aku.pdb.gz").read_bytes()).decode().splitlines()
    cx = load_complex(DATA / "1aku.pdb.gz")
    target = cx.residues()[3]
    out, moved, ref = [], False, None
    for ln in lines:
        if ln.startswith("ATOM") and ln[21] == target.chain and int(ln[22:26]) == target.number:
            if ln[12:16].strip() == "N":
                ref = ln[30:54]
            elif ln[12:16].strip() == "CB" and ref is not None and not moved:
                ln = ln[:30] + ref + ln[54:]
                moved = True
        out.append(ln)
    assert moved
    bad = tmp_path / "1aku_bad.pdb"
    bad.write_text("\n".join(out) + "\n")
    cx_bad = load_complex(bad)
    with pytest.raises(ProtonationError) as err:
        protonate_pocket(cx_bad)
    assert isinstance(err.value, MisiError) and "\n" not in str(err.value)


def test_validation_rejects_misplaced_hydrogens():
    coords = np.array([[0.0, 0.0, 0.0], [1.5, 0.0, 0.0], [3.4, 0.0, 0.0]])
    with pytest.raises(ProtonationError, match="from their parent"):
        validate_protonated(coords, ["C", "C", "H"], np.array([-1, -1, 1]), "")
    with pytest.raises(ProtonationError, match="closer than"):
        validate_protonated(coords[[0, 0, 1]] + [[0, 0, 0], [0.5, 0, 0], [0, 0, 0]], ["C", "C", "C"],
                            np.array([-1, -1, -1]), "")
