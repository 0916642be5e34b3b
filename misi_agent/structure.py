"""Read real protein–ligand entries into a clean pocket + ligand complex.

One complex is what MiSI-Bench shows: the ligand of interest (one copy, heavy atoms, the
entry's own CCD atom names, bond orders from the wwPDB Chemical Component Dictionary) and
the binding pocket (whole amino-acid residues with any heavy atom within 10 Å of any ligand
heavy atom), with author chain IDs, author residue numbers and insertion codes.
Waters and hydrogens are dropped; the first alternate location is kept. Metals and other
hetero groups near the ligand are kept aside as ``environment`` (not displayed) because the
H-bond criteria need them.
"""
from __future__ import annotations

import gzip
import io
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import biotite.structure as struc
import biotite.structure.info as info
import biotite.structure.io.pdb as pdbio
import biotite.structure.io.pdbx as pdbx
from rdkit import Chem, RDLogger

from misi_agent.errors import MisiError
from misi_agent.knowledge import excluded_hetero_codes

RDLogger.DisableLog("rdApp.*")

POCKET_CUTOFF = 10.0
METALS = frozenset(
    "LI NA K RB CS BE MG CA SR BA AL GA IN TL SN PB BI SC TI V CR MN FE CO NI CU ZN Y ZR NB MO "
    "TC RU RH PD AG CD HF TA W RE OS IR PT AU HG LA CE PR ND SM EU GD TB DY HO ER TM YB LU".split()
)


class StructureError(MisiError):
    """A structure cannot be read, or holds no usable ligand or pocket (one-line message)."""


@dataclass(frozen=True)
class ResidueKey:
    """Author chain ID, author residue number, insertion code and residue name."""

    chain: str
    number: int
    ins_code: str
    name: str

    def label(self) -> str:
        """The on-image label, e.g. ``ARG 45`` (with the insertion code appended if any)."""
        return f"{self.name} {self.number}{self.ins_code}"


@dataclass(frozen=True)
class Complex:
    """A pocket + ligand scene read from a real entry.

    ``ligand_mol`` is an RDKit molecule whose atom ``i`` is ``ligand[i]`` and whose
    conformer holds the entry's coordinates. ``bond_orders`` is ``"ccd"`` when the bond
    orders come from the Chemical Component Dictionary (or the ligand file), and
    ``"connectivity"`` when only connectivity could be kept.
    """

    pdb_id: str
    ligand_code: str
    ligand_key: ResidueKey
    pocket: struc.AtomArray
    ligand: struc.AtomArray
    ligand_mol: Chem.Mol
    bond_orders: str
    environment: struc.AtomArray
    source: str
    notes: tuple[str, ...] = field(default=())

    @property
    def displayed(self) -> struc.AtomArray:
        """The atoms a rendering shows: pocket first, then ligand."""
        return self.pocket + self.ligand

    @property
    def n_pocket_residues(self) -> int:
        return len(self.residues())

    def residues(self) -> list[ResidueKey]:
        """Pocket residues in file order."""
        starts = struc.get_residue_starts(self.pocket)
        p = self.pocket
        return [ResidueKey(str(p.chain_id[i]), int(p.res_id[i]), str(p.ins_code[i]), str(p.res_name[i])) for i in starts]

    def residue_index(self) -> np.ndarray:
        """For every pocket atom, the index of its residue in :meth:`residues`."""
        starts = struc.get_residue_starts(self.pocket)
        idx = np.zeros(self.pocket.array_length(), dtype=int)
        idx[starts[1:]] = 1
        return np.cumsum(idx)


# ----------------------------------------------------------------------------- reading


def _open_text(path: Path) -> io.StringIO:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise StructureError(f"{path}: corrupt gzip file ({exc})") from None
    try:
        return io.StringIO(raw.decode("utf-8", errors="replace"))
    except Exception as exc:  # pragma: no cover - decode with replace does not raise
        raise StructureError(f"{path}: unreadable text ({exc})") from None


def structure_format(path: Path) -> str:
    """``cif`` or ``pdb`` from the file name (``.gz`` allowed)."""
    name = path.name.lower().removesuffix(".gz")
    if name.endswith((".cif", ".mmcif")):
        return "cif"
    if name.endswith((".pdb", ".ent")):
        return "pdb"
    raise StructureError(f"{path}: unknown structure format (expected .cif, .mmcif, .pdb or .ent, optionally .gz)")


def read_atoms(path: str | Path) -> struc.AtomArray:
    """Read the first model of an mmCIF or PDB entry with author fields, first altloc and bonds."""
    path = Path(path)
    if not path.is_file():
        raise StructureError(f"{path}: no such file")
    fmt = structure_format(path)
    text = _open_text(path)
    try:
        if fmt == "cif":
            cif = pdbx.CIFFile.read(text)
            atoms = pdbx.get_structure(cif, model=1, altloc="first", use_author_fields=True, include_bonds=True,
                                       extra_fields=["charge"])
        else:
            pdb = pdbio.PDBFile.read(text)
            atoms = pdb.get_structure(model=1, altloc="first", include_bonds=True, extra_fields=["charge"])
    except StructureError:
        raise
    except Exception as exc:
        raise StructureError(f"{path}: unreadable {fmt} structure ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    if atoms.array_length() == 0:
        raise StructureError(f"{path}: no atoms")
    keep = ~np.isin(np.char.upper(atoms.element.astype(str)), ["H", "D"])
    return atoms[keep]


def pdb_id_from_path(path: str | Path) -> str:
    """The PDB ID is the first four characters of the file name (``1abc.cif.gz``, ``7b2c_XYZ.pdb``)."""
    return Path(path).name[:4].lower()


# ----------------------------------------------------------------------------- ligand choice


def _residue_groups(atoms: struc.AtomArray) -> list[tuple[ResidueKey, np.ndarray]]:
    starts = struc.get_residue_starts(atoms, add_exclusive_stop=True)
    groups = []
    for a, b in zip(starts[:-1], starts[1:]):
        i = a
        key = ResidueKey(str(atoms.chain_id[i]), int(atoms.res_id[i]), str(atoms.ins_code[i]), str(atoms.res_name[i]))
        groups.append((key, np.arange(a, b)))
    return groups


@lru_cache(maxsize=1)
def _amino_acids() -> frozenset[str]:
    return frozenset(info.amino_acid_names())


def _bonded_outside(atoms: struc.AtomArray, idx: np.ndarray) -> bool:
    """True when any atom of the group is bonded to a polymer (non-HETATM) atom outside it."""
    if atoms.bonds is None:
        return False
    bonds = atoms.bonds.as_array()
    inside = np.zeros(atoms.array_length(), bool)
    inside[idx] = True
    a, b = bonds[:, 0], bonds[:, 1]
    cross = (inside[a] & ~inside[b] & ~atoms.hetero[b]) | (inside[b] & ~inside[a] & ~atoms.hetero[a])
    return bool(np.any(cross))


def ligand_candidates(atoms: struc.AtomArray) -> list[tuple[ResidueKey, np.ndarray]]:
    """Organic non-polymer groups that could be the ligand of interest, largest first.

    Excludes water, ions and crystallisation additives (knowledge/hetero_groups.yaml), amino
    acids and groups without carbon. Ties keep file order, so the choice is deterministic.
    """
    excluded = excluded_hetero_codes()
    skip = excluded["water"] | excluded["ions"] | excluded["additives"]
    out = []
    for key, idx in _residue_groups(atoms):
        if not atoms.hetero[idx[0]] or key.name in skip:
            continue
        if key.name in _amino_acids() and _bonded_outside(atoms, idx):
            continue  # a modified residue inside the chain, not a free ligand
        elements = set(atoms.element[idx].astype(str))
        if "C" not in elements or len(idx) < 6:
            continue
        out.append((key, idx))
    order = sorted(range(len(out)), key=lambda k: -len(out[k][1]))
    return [out[k] for k in order]


def select_ligand(atoms: struc.AtomArray, code: str | None, source: str = "") -> tuple[ResidueKey, np.ndarray]:
    """The ligand copy to show: by CCD code when given, else the largest organic candidate.

    Among several copies of the code the most complete one wins; ties keep file order.
    """
    if code:
        code = code.upper()
        copies = [(k, i) for k, i in _residue_groups(atoms) if k.name == code]
        if not copies:
            raise StructureError(f"{source}: no ligand with CCD code {code} in the entry")
        best = max(len(i) for _, i in copies)
        return next((k, i) for k, i in copies if len(i) == best)
    cands = ligand_candidates(atoms)
    if not cands:
        raise StructureError(f"{source}: no ligand found (no organic non-polymer group besides water, ions and additives)")
    return cands[0]


# ----------------------------------------------------------------------------- bond orders

_ORDER = {
    struc.BondType.SINGLE: Chem.BondType.SINGLE,
    struc.BondType.AROMATIC_SINGLE: Chem.BondType.SINGLE,
    struc.BondType.DOUBLE: Chem.BondType.DOUBLE,
    struc.BondType.AROMATIC_DOUBLE: Chem.BondType.DOUBLE,
    struc.BondType.TRIPLE: Chem.BondType.TRIPLE,
    struc.BondType.AROMATIC_TRIPLE: Chem.BondType.TRIPLE,
}


@lru_cache(maxsize=512)
def ccd_template(code: str) -> struc.AtomArray | None:
    """The CCD definition of a component (heavy atoms, bonds, formal charges), or None."""
    try:
        res = info.residue(code.upper())
    except (KeyError, ValueError):
        return None
    return res[res.element != "H"]


def _element_symbol(el: str) -> str:
    el = el.strip()
    return el[:1].upper() + el[1:].lower()


def _mol_from_atoms(ligand: struc.AtomArray, bonds: list[tuple[int, int, Chem.BondType]], charges: np.ndarray) -> Chem.RWMol:
    mol = Chem.RWMol()
    for i in range(ligand.array_length()):
        atom = Chem.Atom(_element_symbol(str(ligand.element[i])))
        atom.SetFormalCharge(int(charges[i]))
        atom.SetProp("_Name", str(ligand.atom_name[i]))
        info_ = Chem.AtomPDBResidueInfo()
        info_.SetName(f"{str(ligand.atom_name[i]):<4}"[:4])
        info_.SetResidueName(str(ligand.res_name[i]))
        info_.SetResidueNumber(int(ligand.res_id[i]))
        info_.SetChainId(str(ligand.chain_id[i]))
        atom.SetMonomerInfo(info_)
        mol.AddAtom(atom)
    for a, b, order in bonds:
        if mol.GetBondBetweenAtoms(int(a), int(b)) is None:
            mol.AddBond(int(a), int(b), order)
    conf = Chem.Conformer(ligand.array_length())
    for i, xyz in enumerate(ligand.coord):
        conf.SetAtomPosition(i, [float(v) for v in xyz])
    mol.AddConformer(conf, assignId=True)
    return mol


def _sanitized(mol: Chem.RWMol) -> Chem.Mol | None:
    m = Chem.Mol(mol)
    try:
        Chem.SanitizeMol(m)
    except Exception:
        # Coordinate bonds to metals break valences: drop them and retry.
        rw = Chem.RWMol(mol)
        for bond in list(rw.GetBonds()):
            if {bond.GetBeginAtom().GetSymbol().upper(), bond.GetEndAtom().GetSymbol().upper()} & METALS:
                rw.RemoveBond(bond.GetBeginAtomIdx(), bond.GetEndAtomIdx())
        m = rw.GetMol()
        try:
            Chem.SanitizeMol(m)
        except Exception:
            return None
    return m


def ligand_molecule(ligand: struc.AtomArray, code: str) -> tuple[Chem.Mol, str, str]:
    """An RDKit molecule for the ligand, atom order preserved.

    Returns (mol, bond_orders, note). Bond orders and formal charges come from the CCD
    matched by atom name; if the names do not match, RDKit's ``AssignBondOrdersFromTemplate``
    maps the CCD onto the entry's connectivity; if that fails too, connectivity is kept with
    single bonds and ``bond_orders == "connectivity"``.
    """
    names = [str(n) for n in ligand.atom_name]
    template = ccd_template(code)
    connectivity = [(int(a), int(b), Chem.BondType.SINGLE) for a, b, _ in ligand.bonds.as_array()] if ligand.bonds is not None else []
    if not connectivity and ligand.array_length() > 1:
        connectivity = [(int(a), int(b), Chem.BondType.SINGLE) for a, b, _ in struc.connect_via_distances(ligand).as_array()]
    zero = np.zeros(ligand.array_length(), dtype=int)
    if template is None:
        mol = _sanitized(_mol_from_atoms(ligand, connectivity, zero))
        if mol is None:
            raise StructureError(f"ligand {code}: not in the CCD and RDKit cannot sanitize its connectivity")
        return mol, "connectivity", f"{code} not in the CCD"
    tnames = {str(n): i for i, n in enumerate(template.atom_name)}
    if all(n in tnames for n in names):
        pos = np.array([tnames[n] for n in names])
        inv = {int(t): k for k, t in enumerate(pos)}
        bonds = []
        for a, b, btype in template.bonds.as_array():
            if int(a) in inv and int(b) in inv and struc.BondType(btype) in _ORDER:
                bonds.append((inv[int(a)], inv[int(b)], _ORDER[struc.BondType(btype)]))
        charges = template.charge[pos] if "charge" in template.get_annotation_categories() else zero
        mol = _sanitized(_mol_from_atoms(ligand, bonds, charges))
        if mol is not None:
            note = "" if len(names) == template.array_length() else f"{template.array_length() - len(names)} CCD atoms unresolved"
            return mol, "ccd", note
    # Names differ: map the CCD template onto the entry's connectivity.
    plain = _sanitized(_mol_from_atoms(ligand, connectivity, zero))
    tmol = _sanitized(_mol_from_atoms(template, [(int(a), int(b), _ORDER[struc.BondType(t)])
                                                 for a, b, t in template.bonds.as_array() if struc.BondType(t) in _ORDER],
                                      template.charge if "charge" in template.get_annotation_categories() else np.zeros(template.array_length(), int)))
    if plain is not None and tmol is not None:
        from rdkit.Chem import AllChem
        try:
            assigned = AllChem.AssignBondOrdersFromTemplate(Chem.RemoveHs(tmol), plain)
            Chem.SanitizeMol(assigned)
            return assigned, "ccd", "bond orders assigned from CCD template by graph match"
        except Exception:
            pass
    if plain is None:
        rw = _mol_from_atoms(ligand, connectivity, zero)
        plain = rw.GetMol()
        plain.UpdatePropertyCache(strict=False)
    return plain, "connectivity", f"CCD template of {code} does not match the entry's atoms"


# ----------------------------------------------------------------------------- complex


def _pocket(atoms: struc.AtomArray, ligand_idx: np.ndarray, cutoff: float) -> struc.AtomArray:
    lig = atoms.coord[ligand_idx]
    is_aa = np.isin(atoms.res_name, list(_amino_acids())) & ~np.isin(np.arange(atoms.array_length()), ligand_idx)
    cand = np.flatnonzero(is_aa)
    if cand.size == 0:
        return atoms[np.zeros(atoms.array_length(), bool)]
    d2 = ((atoms.coord[cand, None, :] - lig[None, :, :]) ** 2).sum(-1).min(1)
    near = cand[d2 <= cutoff * cutoff]
    res_ids = struc.get_residue_positions(atoms, np.arange(atoms.array_length()))
    keep = np.isin(res_ids, np.unique(res_ids[near])) & is_aa
    return atoms[keep]


def _environment(atoms: struc.AtomArray, ligand_idx: np.ndarray, cutoff: float) -> struc.AtomArray:
    """Non-water hetero groups (metals, cofactors) within ``cutoff`` of the ligand, not displayed."""
    water = excluded_hetero_codes()["water"]
    mask = atoms.hetero & ~np.isin(atoms.res_name, list(water)) & ~np.isin(atoms.res_name, list(_amino_acids()))
    mask[ligand_idx] = False
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return atoms[np.zeros(atoms.array_length(), bool)]
    d2 = ((atoms.coord[idx, None, :] - atoms.coord[ligand_idx][None]) ** 2).sum(-1).min(1)
    return atoms[idx[d2 <= cutoff * cutoff]]


def load_complex(path: str | Path, ligand: str | None = None, *, ligand_file: str | Path | None = None,
                 pocket_cutoff: float = POCKET_CUTOFF, pdb_id: str | None = None,
                 ligand_key: ResidueKey | None = None) -> Complex:
    """Load a complex from an mmCIF/PDB entry (gzipped or not).

    ``ligand`` is the CCD code of the ligand of interest (else the largest organic
    non-polymer group is taken). With ``ligand_file`` (SDF or MOL2) the ligand and its bond
    orders come from that file and the entry provides the protein. ``ligand_key`` picks one
    exact copy (chain, number, insertion code, name) instead of the default choice.
    """
    path = Path(path)
    atoms = read_atoms(path)
    pid = (pdb_id or pdb_id_from_path(path)).lower()
    notes: list[str] = []
    if ligand_file is not None:
        lig_atoms, mol = read_ligand_file(ligand_file)
        code = str(lig_atoms.res_name[0]) if lig_atoms.array_length() else "LIG"
        key = ResidueKey(str(lig_atoms.chain_id[0]), int(lig_atoms.res_id[0]), "", code)
        combined = atoms + lig_atoms
        lig_idx = np.arange(atoms.array_length(), combined.array_length())
        pocket = _pocket(combined, lig_idx, pocket_cutoff)
        env = atoms[np.zeros(atoms.array_length(), bool)]
        lig = lig_atoms
        bond_orders = "ccd"
        notes.append(f"ligand from {Path(ligand_file).name}")
    else:
        if ligand_key is not None:
            found = [(k, i) for k, i in _residue_groups(atoms) if k == ligand_key]
            if not found:
                raise StructureError(f"{path}: no residue {ligand_key.name} {ligand_key.number}{ligand_key.ins_code} "
                                     f"in chain {ligand_key.chain}")
            key, lig_idx = found[0]
        else:
            key, lig_idx = select_ligand(atoms, ligand, source=str(path))
        lig = atoms[lig_idx]
        code = key.name
        if lig.array_length() < 2:
            raise StructureError(f"{path}: ligand {code} has fewer than two heavy atoms")
        pocket = _pocket(atoms, lig_idx, pocket_cutoff)
        env = _environment(atoms, lig_idx, pocket_cutoff)
        mol, bond_orders, note = ligand_molecule(lig, code)
        if note:
            notes.append(note)
    if pocket.array_length() == 0:
        raise StructureError(f"{path}: no amino-acid residue within {pocket_cutoff} Å of ligand {code}")
    return Complex(pdb_id=pid, ligand_code=code, ligand_key=key, pocket=pocket, ligand=lig, ligand_mol=mol,
                   bond_orders=bond_orders, environment=env, source=str(path), notes=tuple(notes))


def read_ligand_file(path: str | Path) -> tuple[struc.AtomArray, Chem.Mol]:
    """Read a ligand SDF or MOL2 (heavy atoms, bond orders from the file)."""
    path = Path(path)
    if not path.is_file():
        raise StructureError(f"{path}: no such file")
    name = path.name.lower().removesuffix(".gz")
    text = _open_text(path).getvalue()
    if name.endswith((".sdf", ".mol")):
        mol = Chem.MolFromMolBlock(text.split("$$$$")[0], removeHs=False)
    elif name.endswith(".mol2"):
        mol = Chem.MolFromMol2Block(text, removeHs=False)
    else:
        raise StructureError(f"{path}: unknown ligand format (expected .sdf, .mol or .mol2)")
    if mol is None:
        raise StructureError(f"{path}: RDKit cannot read or sanitize the ligand")
    mol = Chem.RemoveHs(mol)
    n = mol.GetNumAtoms()
    arr = struc.AtomArray(n)
    arr.coord = mol.GetConformer().GetPositions().astype(np.float32)
    counts: dict[str, int] = {}
    names = []
    for atom in mol.GetAtoms():
        nm = atom.GetPropsAsDict().get("_TriposAtomName") if atom.HasProp("_TriposAtomName") else None
        if not nm:
            counts[atom.GetSymbol()] = counts.get(atom.GetSymbol(), 0) + 1
            nm = f"{atom.GetSymbol().upper()}{counts[atom.GetSymbol()]}"
        names.append(nm)
        atom.SetProp("_Name", nm)
    arr.atom_name = np.array(names)
    arr.element = np.array([a.GetSymbol().upper() for a in mol.GetAtoms()])
    arr.res_name = np.full(n, "LIG")
    arr.res_id = np.full(n, 1)
    arr.chain_id = np.full(n, "L")
    arr.hetero = np.ones(n, bool)
    bl = struc.BondList(n, np.array([[b.GetBeginAtomIdx(), b.GetEndAtomIdx(), 1] for b in mol.GetBonds()], dtype=int).reshape(-1, 3))
    arr.bonds = bl
    return arr, mol
