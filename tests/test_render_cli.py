"""``misi-agent render``: files, atoms.json against the projection, and clean failures."""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from misi_agent.camera import VIEW_NAMES, Camera
from misi_agent.cli import main
from misi_agent.render.base import project_scene
from misi_agent.scene import scene_from_complex
from misi_agent.structure import load_complex

DATA = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"
STRUCTURE = DATA / "6yqw.cif.gz"


def console_script() -> str:
    exe = Path(sys.executable).parent / "misi-agent"
    return str(exe) if exe.exists() else shutil.which("misi-agent")


def test_render_writes_views_and_atoms_json(tmp_path):
    out = tmp_path / "renders"
    rc = main(["render", str(STRUCTURE), "--out", str(out), "--ligand", "82I", "--views", "front,left",
               "--command", "move x 2, roll y 30", "--size", "256"])
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == ["atoms.json", "front.png", "left.png"]
    assert [p.name for p in tmp_path.iterdir()] == ["renders"]  # no temporary folder left behind
    for view in ("front", "left"):
        with Image.open(out / f"{view}.png") as im:
            assert im.size == (256, 256) and im.mode == "RGB"
    record = json.loads((out / "atoms.json").read_text())
    assert record["ligand"] == "82I" and record["pdb_id"] == "6yqw" and record["size"] == 256
    assert record["commands"] == "move x 2, roll y 30" and record["renderer"] == "raster"
    cx = load_complex(STRUCTURE, "82I")
    for view in ("front", "left"):
        atoms = record["views"][view]["atoms"]
        scene = scene_from_complex(cx, view).apply("move x 2, roll y 30")
        screen, depth, _, visible = project_scene(scene, Camera(256, 256))
        assert len(atoms) == len(scene)
        xy = np.array([[a["x"], a["y"]] for a in atoms])
        np.testing.assert_allclose(xy, screen, atol=2e-3)
        np.testing.assert_allclose([a["depth"] for a in atoms], depth, atol=2e-3)
        assert [a["visible"] for a in atoms] == visible.tolist()
        assert [a["index"] for a in atoms] == list(range(len(scene)))
        assert [a["atom_name"] for a in atoms] == scene.atom_names.tolist()
        assert [a["element"] for a in atoms] == scene.elements.tolist()
        lig = [a for a in atoms if a["residue"] == "ligand"]
        assert len(lig) == cx.ligand.array_length()
        assert {(a["chain"], a["res_number"]) for a in lig} == {(cx.ligand_key.chain, cx.ligand_key.number)}
        pocket = [a for a in atoms if a["residue"] != "ligand"]
        assert {a["residue"] for a in pocket} == {k.label() for k in cx.residues()}
        for a in pocket[:50]:
            assert a["residue"] == f"{cx.pocket.res_name[a['index']]} {a['res_number']}{a['ins_code']}"
            assert a["chain"] == cx.pocket.chain_id[a["index"]]


def test_default_is_six_views_and_largest_ligand(tmp_path):
    out = tmp_path / "all"
    assert main(["render", str(DATA / "1aku.pdb.gz"), "--out", str(out), "--size", "128"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([f"{v}.png" for v in VIEW_NAMES] + ["atoms.json"])
    record = json.loads((out / "atoms.json").read_text())
    assert list(record["views"]) == list(VIEW_NAMES)
    assert record["ligand"] == load_complex(DATA / "1aku.pdb.gz").ligand_code


def _bad_cases(tmp_path: Path) -> dict[str, list[str]]:
    junk = tmp_path / "junk.cif"
    junk.write_text("this is not a structure\n")
    protein_only = tmp_path / "1aku_protein.pdb"  # the real entry without its HETATM records
    lines = gzip.decompress((DATA / "1aku.pdb.gz").read_bytes()).decode().splitlines()
    protein_only.write_text("\n".join(l for l in lines if not l.startswith(("HETATM", "CONECT"))) + "\n")
    s = str(STRUCTURE)
    return {
        "missing file": [str(tmp_path / "nope.cif")],
        "unreadable": [str(junk)],
        "unknown CCD": [s, "--ligand", "ZZZ"],
        "bad CCD": [s, "--ligand", "not a code"],
        "malformed command": [s, "--command", "jump x 3"],
        "unknown view": [s, "--views", "front,side"],
        "repeated view": [s, "--views", "front,front"],
        "size not a number": [s, "--size", "big"],
        "size too small": [s, "--size", "8"],
        "unknown renderer": [s, "--renderer", "povray"],
        "no ligand found": [str(protein_only)],
        "water as ligand": [str(DATA / "1aku.pdb.gz"), "--ligand", "HOH"],
    }


@pytest.mark.parametrize("case", ["missing file", "unreadable", "unknown CCD", "bad CCD", "malformed command",
                                  "unknown view", "repeated view", "size not a number", "size too small",
                                  "unknown renderer", "no ligand found", "water as ligand"])
def test_bad_input_one_line_exit_2_no_output(case, tmp_path, capsys):
    args = _bad_cases(tmp_path)[case]
    out = tmp_path / "out"
    rc = main(["render", args[0], "--out", str(out), *args[1:]])
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and err.startswith("misi-agent: error:")
    # Nothing written: no output folder, no temporary folder beside it.
    assert not out.exists()
    assert {p.name for p in tmp_path.iterdir()} <= {"junk.cif", "1aku_protein.pdb"}


def test_console_script(tmp_path):
    exe = console_script()
    assert exe, "the misi-agent console script is not installed"
    out = tmp_path / "cs"
    ok = subprocess.run([exe, "render", str(STRUCTURE), "--out", str(out), "--views", "top", "--size", "128"],
                        capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert sorted(p.name for p in out.iterdir()) == ["atoms.json", "top.png"]
    bad_out = tmp_path / "bad"
    bad = subprocess.run([exe, "render", str(STRUCTURE), "--out", str(bad_out), "--views", "sideways"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    assert not bad_out.exists()
