"""PLIP as a tool: real PLIP 3.0.1 runs (worker process) on the embedded fixtures."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from misi_agent.errors import MisiError
from misi_agent.structure import load_complex
from misi_agent.tools.plip_tool import (PlipError, PlipHBond, PlipWorker, plip_input, plip_interactions)

DATA = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"


@pytest.fixture(scope="module")
def worker():
    with PlipWorker() as w:
        yield w


@pytest.fixture(scope="module")
def fmn():
    return load_complex(DATA / "1aku.pdb.gz")


def _check_atoms(cx, hbonds):
    for hb in hbonds:
        p, l = hb.protein_index, hb.ligand_index
        assert p >= 0 and l >= 0
        assert str(cx.pocket.atom_name[p]) == hb.protein_atom
        assert (str(cx.pocket.res_name[p]), int(cx.pocket.res_id[p]), str(cx.pocket.chain_id[p])) == \
            (hb.residue_name, hb.residue_number, hb.chain)
        assert str(cx.ligand.atom_name[l]) == hb.ligand_atom
        d = float(np.linalg.norm(cx.pocket.coord[p] - cx.ligand.coord[l]))
        assert d == pytest.approx(hb.distance, abs=0.01)
        assert hb.distance < 4.1 and hb.angle > 100.0
        donor_atom = hb.protein_atom if hb.donor == "protein" else hb.ligand_atom
        acceptor_atom = hb.ligand_atom if hb.donor == "protein" else hb.protein_atom
        assert (hb.donor_atom, hb.acceptor_atom) == (donor_atom, acceptor_atom)
        # the hydrogen sits on the donor and the H···A distance matches it
        d_xyz = cx.pocket.coord[p] if hb.donor == "protein" else cx.ligand.coord[l]
        a_xyz = cx.ligand.coord[l] if hb.donor == "protein" else cx.pocket.coord[p]
        assert 0.9 < np.linalg.norm(np.array(hb.h_coord) - d_xyz) < 1.15
        assert np.linalg.norm(np.array(hb.h_coord) - a_xyz) == pytest.approx(hb.h_distance, abs=0.01)


def test_fmn_hbonds_map_to_real_atoms(fmn, worker):
    res = plip_interactions(fmn, worker=worker)
    assert res.sites == ("FMN:A:150",)
    assert len(res.hbonds) >= 8
    assert all(isinstance(h, PlipHBond) for h in res.hbonds)
    _check_atoms(fmn, res.hbonds)
    assert {h.donor for h in res.hbonds} == {"protein", "ligand"}
    # the main process never loads Open Babel or PLIP
    assert "openbabel" not in sys.modules and "plip" not in sys.modules


def test_same_hbonds_as_plip_command_line_on_the_deposited_file(fmn, worker, tmp_path):
    """Our PDB rewrite of the entry gives PLIP's own answer on the wwPDB file."""
    raw = tmp_path / "1aku.pdb"
    import gzip
    raw.write_bytes(gzip.decompress((DATA / "1aku.pdb.gz").read_bytes()))
    subprocess.run([sys.executable, "-m", "plip.plipcmd", "-f", str(raw), "-t", "-o", str(tmp_path / "out")],
                   check=True, capture_output=True, timeout=300)
    report = (tmp_path / "out" / "1aku_report.txt").read_text()
    section = report[report.index("FMN:A:150"):]
    section = section[section.index("**Hydrogen Bonds**"):]
    rows = [ln for ln in section.splitlines()[1:] if ln.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    theirs = set()
    for ln in rows[1:]:
        if ln.startswith("| RESNR") or not ln.strip("|+=- "):
            break
        cells = dict(zip(header, (c.strip() for c in ln.strip("|").split("|"))))
        theirs.add((int(cells["RESNR"]), cells["RESTYPE"], float(cells["DIST_D-A"]), cells["PROTISDON"] == "True"))
    ours = {(h.residue_number, h.residue_name, round(h.distance, 2), h.donor == "protein")
            for h in plip_interactions(fmn, worker=worker).hbonds}
    assert len(theirs) >= 8
    assert ours == theirs


def test_all_interaction_types_are_typed_and_consistent(worker):
    cx = load_complex(DATA / "7n4w.cif.gz", "P4V")
    res = plip_interactions(cx, worker=worker)
    counts = res.counts()
    assert set(counts) == {"hbond", "hydrophobic", "pi_stacking", "pi_cation", "salt_bridge", "halogen_bond",
                           "water_bridge", "metal_complex"}
    assert counts["hydrophobic"] >= 3
    for h in res.hydrophobic:
        assert str(cx.pocket.element[h.protein_index]) == "C" and str(cx.ligand.element[h.ligand_index]) == "C"
        d = float(np.linalg.norm(cx.pocket.coord[h.protein_index] - cx.ligand.coord[h.ligand_index]))
        assert d == pytest.approx(h.distance, abs=0.01) and d < 4.0
    _check_atoms(cx, res.hbonds)
    lig_names = set(str(n) for n in cx.ligand.atom_name)
    for item in res.pi_stacking + res.pi_cation + res.salt_bridges:
        assert set(item.ligand_atoms) <= lig_names
    for item in res.all():
        hash(item)  # frozen dataclasses


def test_multi_letter_chains_map_back(worker):
    """mmCIF author chains like 'AAA' do not fit a PDB file; PLIP's answer comes back in the entry's names."""
    cx = load_complex(DATA / "7oeo.cif.gz", "V9Z")
    assert cx.ligand_key.chain == "AAA"
    res = plip_interactions(cx, worker=worker)
    assert res.all()
    assert {item.chain for item in res.all() if item.kind != "metal_complex"} == {"AAA"}
    _check_atoms(cx, res.hbonds)


def test_pdb_input_holds_the_ligand_copy_and_links(fmn):
    inp = plip_input(fmn)
    lines = inp.pdb_text.splitlines()
    atoms = [ln for ln in lines if ln.startswith(("ATOM", "HETATM"))]
    assert len(atoms) == inp.atoms.array_length()
    for row in inp.ligand_rows:
        ln = atoms[row]
        assert ln.startswith("HETATM") and ln[17:20] == "FMN" and int(ln[6:11]) == row + 1


def test_worker_is_reused_and_deterministic(fmn):
    with PlipWorker() as w:
        a = plip_interactions(fmn, worker=w)
        pid = w.pid
        b = plip_interactions(fmn, worker=w)
        assert w.pid == pid is not None
    assert a.hbonds == b.hbonds and a.water_bridges == b.water_bridges


def test_timeout_and_bad_input_fail_cleanly(fmn):
    with PlipWorker(timeout=0.001) as w:
        with pytest.raises(PlipError, match="timed out"):
            plip_interactions(fmn, worker=w)
        assert w.pid is None  # the stuck worker was killed
    with PlipWorker() as w:
        with pytest.raises(MisiError, match="PLIP"):
            w.request("this is not a PDB file\n", [1], name="garbage")
        # the worker survives a failed request
        assert plip_interactions(fmn, worker=w).hbonds
