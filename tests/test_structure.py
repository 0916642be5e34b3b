"""Complex loading on real entries: ligand choice, CCD bond orders, whole-residue pockets, inputs.

Fixtures are the committed entries in misi_agent/data/structures (manifest.csv gives the
PoseBusters ligand codes) plus tests/data/1bju.pdb.gz (PLIP pool, trypsin with chymotrypsin
numbering: insertion codes next to the ligand). Expectations are checked against independent
computations: brute-force distances from the raw atoms, the CCD's formula and hydrogens.
"""
from __future__ import annotations

import csv
import gzip
import re
import shutil
import subprocess
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from rdkit import Chem

import biotite.structure as struc
import biotite.structure.info as info
import biotite.structure.io.pdbx as pdbx

from misi_agent.errors import MisiError
from misi_agent.structure import (
    POCKET_CUTOFF,
    ResidueKey,
    StructureError,
    ccd_template,
    ligand_candidates,
    ligand_molecule,
    load_complex,
    read_atoms,
    read_ligand_file,
    select_ligand,
)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "misi_agent" / "data" / "structures"
TEST_DATA = Path(__file__).resolve().parent / "data"
SHARED = REPO.parent / "shared" / "data" / "structures"
# Ligands the automatic choice takes in the PLIP fixtures (eval/results/structure_survey.md).
PLIP_EXPECTED = {"3ems": "ARG", "1aku": "FMN", "1hpx": "KNI", "1bju": "GP6"}


def _manifest() -> list[tuple[Path, str | None, str]]:
    with open(FIXTURES / "manifest.csv", newline="") as fh:
        rows = [(FIXTURES / r["file"], r["ligand_ccd"] or None, r["pdb_id"]) for r in csv.DictReader(fh)]
    return rows + [(TEST_DATA / "1bju.pdb.gz", None, "1bju")]


ENTRIES = _manifest()
IDS = [pid for _, _, pid in ENTRIES]


@lru_cache(maxsize=None)
def _load(path: Path, code: str | None):
    return load_complex(path, code)


@lru_cache(maxsize=None)
def _atoms(path: Path):
    return read_atoms(path)


def _expected_code(code: str | None, pid: str) -> str:
    return code if code else PLIP_EXPECTED[pid]


def _residue_mask(atoms: struc.AtomArray, key: ResidueKey) -> np.ndarray:
    return ((atoms.chain_id == key.chain) & (atoms.res_id == key.number) & (atoms.ins_code == key.ins_code)
            & (atoms.res_name == key.name))


def _protein_residue_starts(atoms: struc.AtomArray) -> dict[int, bool]:
    """Independent notion of a protein residue: amino-acid name and an ATOM record, or a
    peptide bond (C–N ≤ 2.0 Å) to another amino-acid residue (modified residues like MSE)."""
    aa = set(info.amino_acid_names())
    starts = struc.get_residue_starts(atoms)
    res = struc.get_residue_positions(atoms, np.arange(atoms.array_length()))
    is_aa = np.isin(atoms.res_name, list(aa))
    c_idx = np.flatnonzero(is_aa & (atoms.atom_name == "C"))
    n_idx = np.flatnonzero(is_aa & (atoms.atom_name == "N"))
    d = np.linalg.norm(atoms.coord[c_idx, None] - atoms.coord[None, n_idx], axis=-1)
    ci, ni = np.nonzero((d <= 2.0) & (res[c_idx][:, None] != res[n_idx][None, :]))
    linked = set(res[c_idx[ci]].tolist()) | set(res[n_idx[ni]].tolist())
    return {int(s): bool(is_aa[s] and (not atoms.hetero[s] or k in linked)) for k, s in enumerate(starts)}


def _brute_force_pocket(atoms: struc.AtomArray, key: ResidueKey) -> tuple[list[ResidueKey], dict[ResidueKey, float]]:
    """Pocket by the definition, with a full distance matrix: protein residues with any heavy
    atom within 10 Å of any ligand heavy atom, in file order; plus every residue's distance."""
    lig = atoms.coord[_residue_mask(atoms, key)]
    dmin = np.sqrt(((atoms.coord[:, None, :] - lig[None, :, :]) ** 2).sum(-1)).min(1)
    protein = _protein_residue_starts(atoms)
    starts = struc.get_residue_starts(atoms, add_exclusive_stop=True)
    pocket, dist = [], {}
    for a, b in zip(starts[:-1], starts[1:]):
        k = ResidueKey(str(atoms.chain_id[a]), int(atoms.res_id[a]), str(atoms.ins_code[a]), str(atoms.res_name[a]))
        if not protein[int(a)] or k == key:
            continue
        dist[k] = float(dmin[a:b].min())
        if dist[k] <= POCKET_CUTOFF:
            pocket.append(k)
    return pocket, dist


# ----------------------------------------------------------------------------- fixtures load


@pytest.mark.parametrize("path,code,pid", ENTRIES, ids=IDS)
def test_fixture_ligand_and_ccd_bond_orders(path, code, pid):
    cx = _load(path, code)
    assert cx.pdb_id == pid
    assert cx.ligand_code == _expected_code(code, pid)
    assert cx.bond_orders == "ccd"
    atoms = _atoms(path)
    raw = atoms[_residue_mask(atoms, cx.ligand_key)]
    # The entry's own atoms and names, in file order; the molecule mirrors them atom by atom.
    assert list(cx.ligand.atom_name) == list(raw.atom_name)
    np.testing.assert_array_equal(cx.ligand.coord, raw.coord)
    mol = cx.ligand_mol
    assert mol.GetNumAtoms() == cx.ligand.array_length()
    assert [a.GetProp("_Name") for a in mol.GetAtoms()] == list(cx.ligand.atom_name)
    assert [a.GetSymbol().upper() for a in mol.GetAtoms()] == [e.upper() for e in cx.ligand.element]
    np.testing.assert_allclose(mol.GetConformer().GetPositions(), cx.ligand.coord, atol=1e-4)


@pytest.mark.parametrize("path,code,pid", ENTRIES, ids=IDS)
def test_fixture_ligand_matches_ccd_formula_and_hydrogens(path, code, pid):
    """Heavy-atom formula = CCD formula minus unresolved atoms; every atom whose CCD neighbours
    are all resolved carries as many hydrogens as the CCD gives it (checks orders and charges)."""
    cx = _load(path, code)
    full = info.residue(cx.ligand_code)
    names = [str(n) for n in cx.ligand.atom_name]
    fnames = [str(n) for n in full.atom_name]
    formula = str(info.get_from_ccd("chem_comp", cx.ligand_code, "formula").as_array()[0])
    expected = Counter()
    for el, n in re.findall(r"([A-Za-z]+)(\d*)", formula):
        if el.upper() != "H":
            expected[el.upper()] += int(n) if n else 1
    for i, n in enumerate(fnames):
        if full.element[i] != "H" and n not in names:
            expected[str(full.element[i]).upper()] -= 1
    got = Counter(a.GetSymbol().upper() for a in cx.ligand_mol.GetAtoms())
    assert got == +expected
    neighbours = {n: [] for n in fnames}
    for a, b, _ in full.bonds.as_array():
        neighbours[fnames[a]].append(fnames[b])
        neighbours[fnames[b]].append(fnames[a])
    checked = 0
    for atom, name in zip(cx.ligand_mol.GetAtoms(), names):
        heavy_nb = [n for n in neighbours[name] if full.element[fnames.index(n)] != "H"]
        if all(n in names for n in heavy_nb):
            n_h = sum(1 for n in neighbours[name] if full.element[fnames.index(n)] == "H")
            assert atom.GetTotalNumHs() == n_h, (pid, name)
            checked += 1
    assert checked >= len(names) - 2


@pytest.mark.parametrize("path,code,pid", ENTRIES, ids=IDS)
def test_pocket_is_whole_residues_within_cutoff(path, code, pid):
    cx = _load(path, code)
    atoms = _atoms(path)
    expected, dist = _brute_force_pocket(atoms, cx.ligand_key)
    assert cx.residues() == expected
    # Whole residues: every pocket residue has exactly the entry's atoms of that residue.
    idx = cx.residue_index()
    for k, key in enumerate(cx.residues()):
        raw = atoms[_residue_mask(atoms, key)]
        assert list(cx.pocket.atom_name[idx == k]) == list(raw.atom_name)
        np.testing.assert_array_equal(cx.pocket.coord[idx == k], raw.coord)
    # Residues just outside the cutoff exist around every ligand and are left out.
    outside = [k for k, d in dist.items() if POCKET_CUTOFF < d <= POCKET_CUTOFF + 1.0]
    assert outside and not set(outside) & set(cx.residues())


def test_pocket_cutoff_parameter_is_exact():
    path, code, _ = ENTRIES[0]
    atoms = _atoms(path)
    cx = load_complex(path, code, pocket_cutoff=6.0)
    lig = atoms.coord[_residue_mask(atoms, cx.ligand_key)]
    for key in cx.residues():
        res = atoms.coord[_residue_mask(atoms, key)]
        assert np.sqrt(((res[:, None] - lig[None]) ** 2).sum(-1)).min() <= 6.0
    assert len(cx.residues()) < len(_load(path, code).residues())


@pytest.mark.parametrize("path,code,pid", ENTRIES, ids=IDS)
def test_no_waters_or_hydrogens(path, code, pid):
    cx = _load(path, code)
    for arr in (cx.pocket, cx.ligand, cx.environment):
        assert not np.isin(np.char.upper(arr.element.astype(str)), ["H", "D"]).any()
        assert not np.isin(arr.res_name, ["HOH", "WAT", "DOD"]).any()
    assert not cx.pocket.hetero.all()


def test_first_altloc_only():
    """7rh3 has many alternate locations; each atom appears once, with the first altloc's coordinates."""
    path = FIXTURES / "7rh3.cif.gz"
    cx = _load(path, "59O")
    every = pdbx.get_structure(pdbx.CIFFile.read(gzip.open(path, "rt")), model=1, altloc="all",
                               use_author_fields=True)
    every = every[every.element != "H"]
    altloc_atoms = 0
    for k, key in enumerate(cx.residues()):
        res = every[_residue_mask(every, key)]
        ids = [a for a in res.altloc_id if a not in (".", "?", "", " ")]
        first = ids[0] if ids else None
        keep = res[np.isin(res.altloc_id, [".", "?", "", " "]) | (res.altloc_id == first)]
        mine = cx.pocket[cx.residue_index() == k]
        assert len(set(mine.atom_name)) == mine.array_length()
        assert list(mine.atom_name) == list(keep.atom_name)
        np.testing.assert_array_equal(mine.coord, keep.coord)
        altloc_atoms += len(ids)
    assert altloc_atoms > 0


def test_modified_residue_inside_chain_is_pocket():
    """7w06: selenomethionine (HETATM MSE) inside the chain belongs to the pocket."""
    cx = _load(FIXTURES / "7w06.cif.gz", "ITN")
    assert "MSE" in {k.name for k in cx.residues()}
    atoms = _atoms(FIXTURES / "7w06.cif.gz")
    assert (atoms.res_name == "MSE").any() and atoms.hetero[atoms.res_name == "MSE"].all()
    assert "MSE" not in {k.name for k, _ in ligand_candidates(atoms)}
    assert "MSE" not in set(cx.environment.res_name)


def test_free_amino_acid_ligands_are_not_pocket():
    """3ems holds four free ARG (HETATM A 130-133); biotite links consecutive residue names into a
    'peptide' 15-34 Å long, which must not make them protein. The first is the ligand, the
    others stay out of the pocket (a close one is kept as environment)."""
    path = FIXTURES / "3ems.pdb.gz"
    cx = _load(path, None)
    assert cx.ligand_key == ResidueKey("A", 130, "", "ARG")
    assert not {130, 131, 132, 133} & {k.number for k in cx.residues() if k.name == "ARG"}
    atoms = _atoms(path)
    free = np.isin(atoms.res_id, [130, 131, 132, 133]) & (atoms.chain_id == "A")
    for a, b, _ in atoms.bonds.as_array():
        if free[a] != free[b] or (free[a] and atoms.res_id[a] != atoms.res_id[b]):
            pytest.fail(f"bond between residues {atoms.res_id[a]} and {atoms.res_id[b]}")
    cands = [k for k, _ in ligand_candidates(atoms)]
    assert cands == [ResidueKey("A", n, "", "ARG") for n in (130, 131, 132, 133)]
    assert "ARG" in set(cx.environment.res_name)


def test_ligand_key_picks_exact_copy():
    path = FIXTURES / "3ems.pdb.gz"
    key = ResidueKey("A", 132, "", "ARG")
    cx = load_complex(path, ligand_key=key)
    assert cx.ligand_key == key and cx.ligand.array_length() == 12
    with pytest.raises(StructureError, match="no residue ARG 140"):
        load_complex(path, ligand_key=ResidueKey("A", 140, "", "ARG"))


def test_select_ligand_by_code_takes_most_complete_copy_first_in_file():
    atoms = _atoms(FIXTURES / "3ems.pdb.gz")
    key, idx = select_ligand(atoms, "arg")
    assert key == ResidueKey("A", 130, "", "ARG") and len(idx) == 12
    drop = (atoms.res_id == 130) & (atoms.atom_name == "NH2")
    key, _ = select_ligand(atoms[~drop], "ARG")
    assert key == ResidueKey("A", 131, "", "ARG")


# ----------------------------------------------------------------------------- insertion codes


def test_insertion_codes_kept_pdb():
    cx = _load(TEST_DATA / "1bju.pdb.gz", None)
    keys = cx.residues()
    with_ins = {(k.number, k.ins_code) for k in keys if k.ins_code}
    assert {(184, "A"), (188, "A"), (221, "A")} <= with_ins
    # 184 and 184A are different residues, both next to the ligand.
    assert {(k.name, k.number, k.ins_code) for k in keys if k.number == 184} == {("GLY", 184, "A"), ("TYR", 184, "")}
    assert ResidueKey("A", 221, "A", "ALA").label() == "ALA 221A"
    assert "GLY 188A" in [k.label() for k in keys]


@pytest.mark.skipif(not (SHARED / "posebusters" / "6yqv.cif.gz").is_file(), reason="../shared not present")
def test_insertion_codes_kept_mmcif():
    cx = load_complex(SHARED / "posebusters" / "6yqv.cif.gz", _shared_code("6yqv"))
    labels = {(k.chain, k.label()) for k in cx.residues()}
    assert {("H", "TRP 60D"), ("H", "LYS 60F"), ("H", "ARG 221A")} <= labels


def _shared_code(pid: str) -> str:
    with open(SHARED / "posebusters" / "manifest.csv", newline="") as fh:
        return next(r["ligand_ccd"] for r in csv.DictReader(fh) if r["pdb_id"] == pid)


# ----------------------------------------------------------------------------- file forms


@pytest.mark.parametrize("name,code", [("7oeo.cif.gz", "V9Z"), ("1aku.pdb.gz", None)])
def test_plain_and_gzipped_read_the_same(tmp_path, name, code):
    plain = tmp_path / name.removesuffix(".gz")
    plain.write_bytes(gzip.decompress((FIXTURES / name).read_bytes()))
    a, b = _load(FIXTURES / name, code), load_complex(plain, code)
    assert a.residues() == b.residues() and a.ligand_key == b.ligand_key
    np.testing.assert_array_equal(a.pocket.coord, b.pocket.coord)
    np.testing.assert_array_equal(a.ligand.coord, b.ligand.coord)
    assert Chem.MolToSmiles(a.ligand_mol) == Chem.MolToSmiles(b.ligand_mol)


def test_sdf_ligand_file(tmp_path):
    ref = _load(FIXTURES / "7oeo.cif.gz", "V9Z")
    sdf = tmp_path / "lig.sdf"
    sdf.write_text(Chem.MolToMolBlock(ref.ligand_mol) + "$$$$\n")
    cx = load_complex(FIXTURES / "7oeo.cif.gz", ligand_file=sdf)
    assert cx.ligand_code == "LIG" and cx.bond_orders == "ccd"
    np.testing.assert_allclose(cx.ligand.coord, ref.ligand.coord, atol=1e-3)
    assert Chem.MolToSmiles(cx.ligand_mol) == Chem.MolToSmiles(ref.ligand_mol)
    assert cx.residues() == ref.residues()
    names = list(cx.ligand.atom_name)
    assert len(set(names)) == len(names) and names[:2] == ["N1", "C1"]


def test_mol2_ligand_file(tmp_path):
    """A MOL2 written by Open Babel (separate process) from the fixture ligand with hydrogens."""
    ref = _load(FIXTURES / "1hpx.pdb.gz", None)
    sdf = tmp_path / "lig_h.sdf"
    sdf.write_text(Chem.MolToMolBlock(Chem.AddHs(ref.ligand_mol, addCoords=True)) + "$$$$\n")
    mol2 = tmp_path / "lig.mol2"
    subprocess.run([_obabel(), "-isdf", str(sdf), "-omol2", "-O", str(mol2)],
                   check=True, capture_output=True)
    atoms, mol = read_ligand_file(mol2)
    assert atoms.array_length() == ref.ligand.array_length() == mol.GetNumAtoms()
    cx = load_complex(FIXTURES / "1hpx.pdb.gz", ligand_file=mol2)
    np.testing.assert_allclose(cx.ligand.coord, ref.ligand.coord, atol=1e-3)
    # RDKit's MOL2 reader adds stereo from 3D; the constitution, orders and charges are the same.
    assert Chem.MolToSmiles(cx.ligand_mol, isomericSmiles=False) == Chem.MolToSmiles(ref.ligand_mol, isomericSmiles=False)
    assert cx.residues() == ref.residues()
    # Without hydrogens RDKit would make radicals: refused with a one-line message.
    bare = tmp_path / "bare.mol2"
    subprocess.run([_obabel(), "-isdf", str(sdf), "-omol2", "-d", "-O", str(bare)],
                   check=True, capture_output=True)
    with pytest.raises(StructureError, match="radical"):
        read_ligand_file(bare)


def _obabel() -> str:
    """The obabel program of the openbabel wheel: beside this interpreter, else on PATH."""
    here = Path(sys.executable).parent / "obabel"
    return str(here) if here.exists() else (shutil.which("obabel") or "obabel")


def _pdb_lines(name: str) -> list[str]:
    return gzip.decompress((FIXTURES / name).read_bytes()).decode().splitlines(keepends=True)


def _edit_ligand(lines: list[str], resname: str, fn) -> list[str]:
    out = []
    for line in lines:
        if line.startswith("HETATM") and line[17:20] == resname:
            line = fn(line)
            if line is None:
                continue
        out.append(line)
    return out


def test_renamed_atoms_get_ccd_orders_by_graph_match(tmp_path):
    ref = _load(FIXTURES / "1aku.pdb.gz", None)
    counter = iter(range(1, 100))
    lines = _edit_ligand(_pdb_lines("1aku.pdb.gz"), "FMN", lambda l: l[:12] + f" X{next(counter):<2d}" + l[16:])
    path = tmp_path / "1aku_renamed.pdb"
    path.write_text("".join(lines))
    cx = load_complex(path, "FMN")
    assert cx.bond_orders == "ccd" and "graph match" in " ".join(cx.notes)
    assert cx.ligand.atom_name[0] == "X1"
    assert Chem.MolToSmiles(cx.ligand_mol) == Chem.MolToSmiles(ref.ligand_mol)


def test_unresolved_atoms_keep_ccd_orders(tmp_path):
    lines = _edit_ligand(_pdb_lines("1aku.pdb.gz"), "FMN", lambda l: None if l[12:16].strip() in ("O2P", "O3P") else l)
    path = tmp_path / "1aku_partial.pdb"
    path.write_text("".join(lines))
    cx = load_complex(path, "FMN")
    assert cx.bond_orders == "ccd" and cx.ligand.array_length() == 29
    assert "2 CCD atoms unresolved" in cx.notes
    assert cx.ligand_mol.GetNumAtoms() == 29


def test_mismatching_template_keeps_connectivity(tmp_path):
    """FMN's atoms labelled ATP: the ATP template matches neither by name nor by graph."""
    lines = _edit_ligand(_pdb_lines("1aku.pdb.gz"), "FMN", lambda l: l[:17] + "ATP" + l[20:])
    path = tmp_path / "1aku_atp.pdb"
    path.write_text("".join(lines))
    cx = load_complex(path, "ATP")
    assert cx.bond_orders == "connectivity"
    assert "does not match" in " ".join(cx.notes)
    mol = cx.ligand_mol
    assert mol.GetNumAtoms() == cx.ligand.array_length() == 31
    assert {b.GetBondType() for b in mol.GetBonds()} == {Chem.BondType.SINGLE}
    # The bonds are the entry's own CONECT records.
    conect = {tuple(sorted((int(a), int(b)))) for a, b, _ in cx.ligand.bonds.as_array()}
    assert {tuple(sorted((b.GetBeginAtomIdx(), b.GetEndAtomIdx()))) for b in mol.GetBonds()} == conect
    assert len(conect) == 33


def test_ligand_molecule_direct_name_and_graph_paths_agree():
    cx = _load(FIXTURES / "7xfa.cif.gz", "D9J")
    renamed = cx.ligand.copy()
    renamed.atom_name = np.array([f"Q{i}" for i in range(renamed.array_length())])
    renamed.bonds = None  # no file bonds either: connectivity from distances
    mol, orders, note = ligand_molecule(renamed, "D9J")
    assert orders == "ccd" and "graph match" in note
    assert Chem.MolToSmiles(mol) == Chem.MolToSmiles(cx.ligand_mol)
    assert ccd_template("D9J").array_length() == cx.ligand.array_length()


def test_multi_model_file_reads_first_model(tmp_path):
    lines = [l for l in _pdb_lines("1aku.pdb.gz") if l.startswith(("ATOM", "HETATM", "TER"))]
    shifted = [l[:30] + f"{float(l[30:38]) + 25.0:8.3f}" + l[38:] if l.startswith(("ATOM", "HETATM")) else l
               for l in lines]
    path = tmp_path / "two_models.pdb"
    path.write_text("MODEL        1\n" + "".join(lines) + "ENDMDL\nMODEL        2\n" + "".join(shifted) + "ENDMDL\nEND\n")
    ref = _load(FIXTURES / "1aku.pdb.gz", None)
    cx = load_complex(path)
    np.testing.assert_array_equal(cx.ligand.coord, ref.ligand.coord)
    assert cx.residues() == ref.residues()


# ----------------------------------------------------------------------------- bad input


def _bad_inputs(tmp: Path) -> list[tuple[Path, dict, str]]:
    corrupt = tmp / "corrupt.cif.gz"
    corrupt.write_bytes(gzip.compress(b"data_x\n" * 200)[:40] + b"\x00garbage" * 8)
    garbage_cif = tmp / "garbage.cif"
    garbage_cif.write_text("this is not\nan mmCIF 'file\n")
    garbage_pdb = tmp / "garbage.pdb"
    garbage_pdb.write_text("hello\nworld\n")
    empty = tmp / "empty.cif"
    empty.write_text("")
    protein_only = tmp / "protein.pdb"
    protein_only.write_text("".join(l for l in _pdb_lines("1aku.pdb.gz") if l.startswith("ATOM")) + "END\n")
    txt = tmp / "entry.txt"
    txt.write_text("x")
    bad_sdf = tmp / "bad.sdf"
    bad_sdf.write_text("not a molfile\n")
    return [
        (tmp / "missing.cif", {}, "no such file"),
        (corrupt, {}, "corrupt gzip"),
        (garbage_cif, {}, "unreadable cif|no atoms"),
        (garbage_pdb, {}, "no atoms|unreadable pdb"),
        (empty, {}, "unreadable cif|no atoms"),
        (txt, {}, "unknown structure format"),
        (FIXTURES / "7oeo.cif.gz", {"ligand": "ZZZ"}, "no ligand with CCD code ZZZ"),
        (protein_only, {}, "no ligand found"),
        (FIXTURES / "7oeo.cif.gz", {"ligand_file": bad_sdf}, "RDKit cannot read"),
        (FIXTURES / "7oeo.cif.gz", {"ligand_file": tmp / "missing.sdf"}, "no such file"),
        (FIXTURES / "7oeo.cif.gz", {"ligand_file": txt}, "unknown ligand format"),
    ]


def test_bad_inputs_raise_one_line_errors(tmp_path):
    for path, kwargs, pattern in _bad_inputs(tmp_path):
        with pytest.raises(StructureError) as err:
            load_complex(path, **kwargs)
        msg = str(err.value)
        assert isinstance(err.value, MisiError)
        assert "\n" not in msg and re.search(pattern, msg), (path.name, msg)


@pytest.mark.skipif(not (SHARED / "plip" / "5ddr.pdb.gz").is_file(), reason="../shared not present")
def test_ligand_bound_to_rna_fails_with_reason():
    with pytest.raises(StructureError, match="binds nucleic acid"):
        load_complex(SHARED / "plip" / "5ddr.pdb.gz")


# ----------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("name,code", [("7x9k.cif.gz", "8OG"), ("3ems.pdb.gz", None)])
def test_loading_is_deterministic(name, code):
    a, b = load_complex(FIXTURES / name, code), load_complex(FIXTURES / name, code)
    for x, y in ((a.pocket, b.pocket), (a.ligand, b.ligand), (a.environment, b.environment)):
        assert x == y  # biotite compares coordinates, every annotation and bonds
    assert a.ligand_key == b.ligand_key and a.residues() == b.residues() and a.notes == b.notes
    assert Chem.MolToMolBlock(a.ligand_mol) == Chem.MolToMolBlock(b.ligand_mol)


def test_ccd_template_without_ideal_coordinates_is_quiet():
    """ELI has no ideal coordinates in the CCD: its template still comes (atoms and bonds are what is used) and
    biotite's warning about the fallback coordinates does not reach the user's terminal (a label misread as
    ``ELI 104`` asks for it in the middle of an image-only answer)."""
    import warnings

    ccd_template.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = ccd_template("ELI")
    assert t is not None and t.array_length() > 5 and set(t.element) <= {"C", "N", "O", "S", "P", "F", "CL", "BR"}
