"""``misi-agent hbonds``: both engines on real fixtures, JSON schema, clean failures."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from misi_agent.cli import main
from misi_agent.structure import load_complex
from misi_agent.tools.hbond_format import parse_pocket_ligand, pocket_keys
from misi_agent.tools.hbonds import find_hbonds

DATA = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"
FMN = str(DATA / "1aku.pdb.gz")
REQUIRED = {"engine": str, "residue_name": str, "residue_number": int, "insertion_code": str, "chain": str,
            "protein_atom": str, "ligand_atom": str, "donor": str, "distance": float, "group": str}


def _json(capsys, argv) -> list[dict]:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def _check_schema(records):
    for rec in records:
        for key, typ in REQUIRED.items():
            assert isinstance(rec[key], typ), (key, rec)
        assert rec["donor"] in ("protein", "ligand")
        assert 2.0 < rec["distance"] < 4.2


def test_json_matches_the_engine(capsys):
    records = _json(capsys, ["hbonds", FMN, "--json"])
    _check_schema(records)
    cx = load_complex(FMN)
    bonds = find_hbonds(cx)
    assert len(records) == len(bonds) >= 8
    assert {r["engine"] for r in records} == {"chimerax"}
    assert {(r["residue_number"], r["protein_atom"], r["ligand_atom"], r["donor"]) for r in records} == \
        {(b.residue_number, b.protein_atom, b.ligand_atom, b.donor) for b in bonds}


def test_both_engines_are_labelled(capsys):
    records = _json(capsys, ["hbonds", FMN, "--engine", "both", "--json"])
    _check_schema(records)
    engines = {r["engine"] for r in records}
    assert engines == {"chimerax", "plip"}
    plip = [r for r in records if r["engine"] == "plip"]
    assert all(r["h_distance"] is not None and r["angles"]["theta"] > 100 for r in plip)
    assert "openbabel" not in sys.modules


def test_plain_output_ends_with_the_answer_string(capsys):
    assert main(["hbonds", str(DATA / "7n4w.cif.gz"), "--ligand", "P4V"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("7n4w P4V")
    bonds = find_hbonds(load_complex(DATA / "7n4w.cif.gz", "P4V"))
    assert out[1].startswith(f"chimerax: {len(bonds)} H-bond")
    assert len(out) == 3 + len(bonds)
    answer = out[-1].split(": ", 1)[1]
    assert parse_pocket_ligand(answer if bonds else "") == pocket_keys(bonds)


def test_strict_is_a_subset_and_protonation_gives_hydrogens(capsys):
    relaxed = _json(capsys, ["hbonds", FMN, "--json"])
    strict = _json(capsys, ["hbonds", FMN, "--strict", "--json"])
    key = lambda r: (r["residue_number"], r["protein_atom"], r["ligand_atom"], r["donor"])  # noqa: E731
    assert {key(r) for r in strict} < {key(r) for r in relaxed}
    protonated = _json(capsys, ["hbonds", FMN, "--protonate", "--json"])
    _check_schema(protonated)
    assert protonated and all(r["h_distance"] is not None for r in protonated if r["donor"] == "protein")


@pytest.mark.parametrize("argv, message", [
    (["hbonds", "/nonexistent/9xyz.cif"], "no such file"),
    (["hbonds", FMN, "--ligand", "ZZZ"], "no ligand with CCD code ZZZ"),
    (["hbonds", FMN, "--engine", "plip", "--protonate"], "chimerax engine"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("misi-agent: error:") and message in lines[0]


def test_console_script(tmp_path):
    exe = Path(sys.executable).with_name("misi-agent")
    ok = subprocess.run([str(exe), "hbonds", str(DATA / "6yqw.cif.gz"), "--ligand", "82I", "--json"],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    records = json.loads(ok.stdout)
    _check_schema(records)
    assert records and {r["ligand_atom"] for r in records} <= {str(n) for n in
                                                               load_complex(DATA / "6yqw.cif.gz", "82I").ligand.atom_name}
    bad = subprocess.run([str(exe), "hbonds", str(tmp_path / "missing.pdb")], capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and bad.stdout == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
