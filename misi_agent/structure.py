"""Read real protein–ligand entries into a clean pocket + ligand complex.

One complex is what MiSI-Bench shows: the ligand of interest (one copy, heavy atoms, the
entry's own CCD atom names, bond orders from the wwPDB Chemical Component Dictionary) and
the binding pocket (whole amino-acid residues of the protein chains with any heavy atom
within 10 Å of any ligand heavy atom), with author chain IDs, author residue numbers and
insertion codes. Waters and hydrogens are dropped; the first alternate location is kept.
Metals, cofactors and free amino acids near the ligand are kept aside as ``environment``
(not displayed) because the H-bond criteria need them.

Bond orders: the CCD template is matched by atom name, else by bond graph (renamed or
partially resolved ligands); only if both fail is connectivity kept. eval/survey_structures.py
loads all 349 shared entries and checks the results against the CCD
(eval/results/structure_survey.md).
"""
from __future__ import annotations

import gzip
import io
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree
import biotite.structure as struc
import biotite.structure.info as info
import biotite.structure.io.pdb as pdbio
import biotite.structure.io.pdbx as pdbx
from rdkit import Chem, RDLogger

from misi_agent.errors import MisiError
from misi_agent.knowledge import excluded_hetero_codes

RDLogger.DisableLog("rdApp.*")

POCKET_CUTOFF = 10.0
# Inter-residue bonds longer than this are not bonds: biotite links consecutive residues of a
# chain by name (peptide/phosphodiester) without looking at the distance, which chains free
# amino-acid ligands (3ems ARG 130-133) onto the protein across 10-30 Å gaps. Metal
# coordination (struct_conn "metalc", LINK) stays below it.
MAX_LINK_LENGTH = 3.0
# Graph matches of a ligand onto its CCD template whose superposition RMSD onto the ideal
# coordinates is within this of the best one count as equally good (coordinate noise).
MATCH_RMSD_TOLERANCE = 0.3
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
        except (OSError, EOFError, zlib.error) as exc:
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
    """Read the first model of an mmCIF or PDB entry with author fields, first altloc and bonds.

    Parsing an mmCIF entry costs 0.1-0.5 s, and one question's tools may read the same entry
    several times (choosing the ligand, then loading the complex), so parsed entries are kept
    in a small in-process cache keyed by the file's path, size and modification time; each
    call gets its own copy, so callers may modify what they get.
    """
    path = Path(path)
    if not path.is_file():
        raise StructureError(f"{path}: no such file")
    stat = path.stat()
    return _read_atoms_cached(str(path.resolve()), stat.st_size, stat.st_mtime_ns).copy()


@lru_cache(maxsize=24)
def _read_atoms_cached(path_text: str, size: int, mtime_ns: int) -> struc.AtomArray:
    """:func:`read_atoms`'s parse, cached (``size`` and ``mtime_ns`` make a changed file a new key)."""
    path = Path(path_text)
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
    _drop_long_links(atoms)
    keep = ~np.isin(np.char.upper(atoms.element.astype(str)), ["H", "D"])
    atoms = atoms[keep]
    if atoms.array_length() == 0:
        raise StructureError(f"{path}: no heavy atoms")
    return atoms


def _drop_long_links(atoms: struc.AtomArray) -> None:
    """Remove inter-residue bonds longer than :data:`MAX_LINK_LENGTH` (in place)."""
    if atoms.bonds is None or atoms.bonds.get_bond_count() == 0:
        return
    bonds = atoms.bonds.as_array()
    res = struc.get_residue_positions(atoms, np.arange(atoms.array_length()))
    a, b = bonds[:, 0].astype(int), bonds[:, 1].astype(int)
    length = np.linalg.norm(atoms.coord[a].astype(float) - atoms.coord[b].astype(float), axis=1)
    bad = (res[a] != res[b]) & ~(length <= MAX_LINK_LENGTH)
    if np.any(bad):
        atoms.bonds = struc.BondList(atoms.array_length(), bonds[~bad])


def pdb_id_from_path(path: str | Path) -> str:
    """The PDB ID is the first four characters of the file name (``1abc.cif.gz``, ``7b2c_XYZ.pdb``)."""
    return Path(path).name[:4].lower()


# ----------------------------------------------------------------------------- ligand choice


def _residue_groups(atoms: struc.AtomArray) -> list[tuple[ResidueKey, np.ndarray]]:
    starts = struc.get_residue_starts(atoms, add_exclusive_stop=True)
    first = starts[:-1]
    fields = zip(atoms.chain_id[first].tolist(), atoms.res_id[first].tolist(), atoms.ins_code[first].tolist(),
                 atoms.res_name[first].tolist(), first.tolist(), starts[1:].tolist())
    return [(ResidueKey(str(c), int(n), str(i), str(r)), np.arange(a, b)) for c, n, i, r, a, b in fields]


@lru_cache(maxsize=1)
def _amino_acids() -> frozenset[str]:
    return frozenset(info.amino_acid_names())


def polymer_amino_acids(atoms: struc.AtomArray) -> np.ndarray:
    """Per atom: True for amino-acid residues that belong to a protein chain.

    A residue counts when its name is a CCD amino acid and it is an ATOM record or is linked
    by covalent inter-residue bonds (through other amino acids) to one, so modified residues
    such as MSE (HETATM inside the chain) are protein while free amino acids, e.g. the ARG
    ligands of 3ems, are not.
    """
    n = atoms.array_length()
    if n == 0:
        return np.zeros(0, bool)
    starts = struc.get_residue_starts(atoms)
    res = struc.get_residue_positions(atoms, np.arange(n))
    n_res = len(starts)
    is_aa_atom = np.isin(atoms.res_name, list(_amino_acids()))
    res_is_aa = is_aa_atom[starts]
    res_has_atom_record = np.zeros(n_res, bool)
    np.logical_or.at(res_has_atom_record, res, ~atoms.hetero)
    if atoms.bonds is not None and atoms.bonds.get_bond_count():
        bonds = atoms.bonds.as_array()
        a, b, t = bonds[:, 0].astype(int), bonds[:, 1].astype(int), bonds[:, 2]
        link = (res[a] != res[b]) & is_aa_atom[a] & is_aa_atom[b] & (t != int(struc.BondType.COORDINATION))
        ra, rb = res[a[link]], res[b[link]]
    else:
        ra = rb = np.zeros(0, int)
    graph = coo_matrix((np.ones(len(ra)), (ra, rb)), shape=(n_res, n_res))
    _, comp = connected_components(graph, directed=False)
    comp_has_atom_record = np.zeros(comp.max() + 1, bool)
    np.logical_or.at(comp_has_atom_record, comp[res_has_atom_record & res_is_aa], True)
    res_polymer = res_is_aa & comp_has_atom_record[comp]
    return res_polymer[res]


def ligand_candidates(atoms: struc.AtomArray, include_additives: bool = False) -> list[tuple[ResidueKey, np.ndarray]]:
    """Organic non-polymer groups that could be the ligand of interest, largest first.

    Excludes water, ions and crystallisation additives (knowledge/hetero_groups.yaml), amino
    acids of the protein chains (free amino acids stay candidates), groups without carbon and
    groups of fewer than six heavy atoms. Ties keep file order, so the choice is deterministic.
    With ``include_additives`` the additive-listed groups (sugars, succinate, glycerol, ...)
    follow the others, largest first: some entries' ligand of interest is one of them (7wjb
    BGC, 7ecr SIN), and an agent that sees the pictures can tell.
    """
    excluded = excluded_hetero_codes()
    skip = excluded["water"] | excluded["ions"]
    polymer = polymer_amino_acids(atoms)
    out = []
    for key, idx in _residue_groups(atoms):
        if not atoms.hetero[idx[0]] or key.name in skip:
            continue
        additive = key.name in excluded["additives"]
        if additive and not include_additives:
            continue
        if polymer[idx[0]]:
            continue  # a modified residue inside the chain, not a free ligand
        elements = set(atoms.element[idx].astype(str))
        if "C" not in elements or len(idx) < 6:
            continue
        out.append((key, idx, additive))
    order = sorted(range(len(out)), key=lambda k: (out[k][2], -len(out[k][1])))
    return [out[k][:2] for k in order]


def select_ligand(atoms: struc.AtomArray, code: str | None, source: str = "") -> tuple[ResidueKey, np.ndarray]:
    """The ligand copy to show: by CCD code when given, else the largest organic candidate.

    Among several copies of the code (residues of protein chains excluded) the most complete
    one wins; ties keep file order.
    """
    if code:
        code = code.upper()
        copies = [(k, i) for k, i in _residue_groups(atoms) if k.name == code]
        if not copies:
            raise StructureError(f"{source}: no ligand with CCD code {code} in the entry")
        polymer = polymer_amino_acids(atoms)
        free = [(k, i) for k, i in copies if not polymer[i[0]]]
        if not free:
            raise StructureError(f"{source}: {code} occurs only as a residue of a protein chain, not as a ligand")
        copies = free
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
    """The CCD definition of a component (heavy atoms, bonds, formal charges), or None.

    Components without ideal coordinates take their model coordinates; biotite warns about that on
    stderr, which says nothing to a user who only asked a question (only the atoms and bonds are used)."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The coordinates are missing for some atoms")
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
    """A sanitized copy, or None.

    RDKit's sanitization already turns metal bonds that overload a donor's valence into
    dative bonds (HEM Fe–N); if it still fails, the bonds to metals are removed and it is
    tried once more.
    """
    m = Chem.Mol(mol)
    try:
        Chem.SanitizeMol(m)
    except Exception:
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


def _plain_graph(atoms: struc.AtomArray, pairs: list[tuple[int, int]]) -> Chem.Mol:
    """Elements and single bonds only, unsanitized, with ring info: a graph for matching."""
    mol = _mol_from_atoms(atoms, [(a, b, Chem.BondType.SINGLE) for a, b in pairs],
                          np.zeros(atoms.array_length(), int)).GetMol()
    mol.UpdatePropertyCache(strict=False)
    Chem.FastFindRings(mol)
    return mol


def _graph_match(ligand: struc.AtomArray, pairs: list[tuple[int, int]], template: struc.AtomArray) -> np.ndarray | None:
    """Template index of every ligand atom, by matching the ligand's bond graph into the CCD's.

    The ligand may lack atoms (unresolved) and bonds (e.g. to a metal) of the template, so
    a match can be ambiguous (which CH2–OH lost its O?). Matches that agree with the most atom
    names are kept, then those whose coordinates superpose onto the CCD's ideal coordinates
    (proper rotation, so handedness counts) within :data:`MATCH_RMSD_TOLERANCE` of the best;
    the first of these in RDKit's order wins, so symmetric ambiguities (which carboxylate O
    is missing) follow the CCD's atom order.
    """
    query = _plain_graph(ligand, pairs)
    target = _plain_graph(template, [(int(a), int(b)) for a, b, _ in template.bonds.as_array()])
    matches = target.GetSubstructMatches(query, uniquify=False, useChirality=False, maxMatches=2000)
    if not matches:
        return None
    names = [str(n) for n in ligand.atom_name]
    tnames = [str(n) for n in template.atom_name]
    agree = np.array([sum(names[i] == tnames[j] for i, j in enumerate(m)) for m in matches])
    best = np.flatnonzero(agree == agree.max())
    ideal = template.coord.astype(float)
    rmsd = np.array([_superposed_rmsd(ligand.coord.astype(float), ideal[list(matches[k])]) for k in best])
    if np.all(np.isfinite(rmsd)):
        best = best[rmsd <= rmsd.min() + MATCH_RMSD_TOLERANCE]
    return np.array(matches[int(best[0])])


def _superposed_rmsd(a: np.ndarray, b: np.ndarray) -> float:
    """RMSD of ``a`` onto ``b`` after the best proper rotation and translation (Kabsch)."""
    a = a - a.mean(axis=0)
    b = b - b.mean(axis=0)
    u, s, vt = np.linalg.svd(a.T @ b)
    d = np.sign(np.linalg.det(u @ vt))
    s[-1] *= d
    return float(np.sqrt(max(((a**2).sum() + (b**2).sum() - 2 * s.sum()) / len(a), 0.0)))


def ccd_molecule(ligand: struc.AtomArray, template: struc.AtomArray, pos: np.ndarray) -> Chem.Mol | None:
    """The ligand with the template's bond orders and charges, ligand atom i = template atom pos[i]."""
    inv = {int(t): k for k, t in enumerate(pos)}
    bonds = []
    for a, b, btype in template.bonds.as_array():
        if int(a) in inv and int(b) in inv and struc.BondType(btype) in _ORDER:
            bonds.append((inv[int(a)], inv[int(b)], _ORDER[struc.BondType(btype)]))
    charges = template.charge[pos] if "charge" in template.get_annotation_categories() else np.zeros(len(pos), int)
    return _sanitized(_mol_from_atoms(ligand, bonds, charges))


def _connectivities(ligand: struc.AtomArray) -> list[list[tuple[int, int]]]:
    """Candidate bond graphs of a ligand: the file's bonds (CONECT, struct_conn, CCD by name)
    when every atom has one, then bonds from interatomic distances."""
    n = ligand.array_length()
    out = []
    if ligand.bonds is not None and ligand.bonds.get_bond_count():
        pairs = [(int(a), int(b)) for a, b, _ in ligand.bonds.as_array()]
        if n == 1 or len({i for p in pairs for i in p}) == n:
            out.append(pairs)
    if n > 1:
        pairs = [(int(a), int(b)) for a, b, _ in struc.connect_via_distances(ligand, inter_residue=True).as_array()]
        if pairs not in out:
            out.append(pairs)
    return out or [[]]


def ligand_molecule(ligand: struc.AtomArray, code: str) -> tuple[Chem.Mol, str, str]:
    """An RDKit molecule for the ligand, atom order preserved.

    Returns (mol, bond_orders, note). Bond orders and formal charges come from the CCD:
    matched by atom name when the names are unique and each is a CCD atom of the same
    element; otherwise by matching the ligand's bond graph (file bonds, else distances) into
    the CCD's (:func:`_graph_match`, which tolerates unresolved atoms). If neither works (or
    RDKit cannot sanitize the result), single-bond connectivity is kept and ``bond_orders ==
    "connectivity"``.
    """
    names = [str(n) for n in ligand.atom_name]
    template = ccd_template(code)
    graphs = _connectivities(ligand)
    zero = np.zeros(ligand.array_length(), dtype=int)
    if template is None:
        mol = _sanitized(_mol_from_atoms(ligand, [(a, b, Chem.BondType.SINGLE) for a, b in graphs[0]], zero))
        if mol is None:
            raise StructureError(f"ligand {code}: not in the CCD and RDKit cannot sanitize its connectivity")
        return mol, "connectivity", f"{code} not in the CCD"
    missing = template.array_length() - len(names)
    unresolved = f"; {missing} CCD atoms unresolved" if missing > 0 else ""
    tnames = {str(n): i for i, n in enumerate(template.atom_name)}
    names_match = (len(set(names)) == len(names) and all(n in tnames for n in names)
                   and all(_element_symbol(str(template.element[tnames[n]])) == _element_symbol(str(e))
                           for n, e in zip(names, ligand.element)))
    if names_match:
        mol = ccd_molecule(ligand, template, np.array([tnames[n] for n in names]))
        if mol is not None:
            return mol, "ccd", unresolved.removeprefix("; ")
    for pairs in graphs:
        pos = _graph_match(ligand, pairs, template)
        mol = ccd_molecule(ligand, template, pos) if pos is not None else None
        if mol is not None:
            return mol, "ccd", "bond orders from the CCD by graph match (atom names differ)" + unresolved
    plain = _mol_from_atoms(ligand, [(a, b, Chem.BondType.SINGLE) for a, b in graphs[0]], zero)
    mol = _sanitized(plain)
    if mol is None:
        mol = plain.GetMol()
        mol.UpdatePropertyCache(strict=False)
    return mol, "connectivity", f"CCD template of {code} does not match the entry's atoms"


# ----------------------------------------------------------------------------- complex


def _near(points: np.ndarray, ligand: np.ndarray, cutoff: float) -> np.ndarray:
    """Per point: True when any ligand atom is within ``cutoff`` Å (k-d tree, not an N×M matrix)."""
    if len(points) == 0 or len(ligand) == 0:
        return np.zeros(len(points), bool)
    d, _ = cKDTree(np.asarray(ligand, float)).query(np.asarray(points, float), k=1,
                                                     distance_upper_bound=cutoff + 1e-3)
    return d <= cutoff


def _pocket(atoms: struc.AtomArray, ligand_idx: np.ndarray, cutoff: float) -> struc.AtomArray:
    """Whole protein amino-acid residues with any heavy atom within ``cutoff`` of the ligand."""
    is_aa = polymer_amino_acids(atoms)
    is_aa[ligand_idx] = False
    cand = np.flatnonzero(is_aa)
    near = cand[_near(atoms.coord[cand], atoms.coord[ligand_idx], cutoff)]
    res_ids = struc.get_residue_positions(atoms, np.arange(atoms.array_length()))
    keep = np.isin(res_ids, np.unique(res_ids[near])) & is_aa
    return atoms[keep]


def _environment(atoms: struc.AtomArray, ligand_idx: np.ndarray, cutoff: float) -> struc.AtomArray:
    """Atoms of non-water hetero groups (metals, cofactors, free amino acids) within ``cutoff``
    of the ligand; not displayed. Whole groups are not needed: only the near atoms are kept."""
    water = excluded_hetero_codes()["water"]
    mask = atoms.hetero & ~np.isin(atoms.res_name, list(water)) & ~polymer_amino_acids(atoms)
    mask[ligand_idx] = False
    idx = np.flatnonzero(mask)
    return atoms[idx[_near(atoms.coord[idx], atoms.coord[ligand_idx], cutoff)]]


def _nucleic_acid_hint(atoms: struc.AtomArray, ligand_coord: np.ndarray, cutoff: float) -> str:
    """`` (it binds nucleic acid: N nucleotides within ...)`` when nucleotides surround the ligand."""
    is_nt = np.isin(atoms.res_name, list(info.nucleotide_names()))
    idx = np.flatnonzero(is_nt)
    near = idx[_near(atoms.coord[idx], ligand_coord, cutoff)]
    if near.size == 0:
        return ""
    n = len(np.unique(struc.get_residue_positions(atoms, near)))
    return f" (it binds nucleic acid: {n} nucleotides within {cutoff} Å; pockets are made of amino acids only)"


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
        raise StructureError(f"{path}: no amino-acid residue within {pocket_cutoff} Å of ligand {code}"
                             f"{_nucleic_acid_hint(atoms, lig.coord, pocket_cutoff)}")
    return Complex(pdb_id=pid, ligand_code=code, ligand_key=key, pocket=pocket, ligand=lig, ligand_mol=mol,
                   bond_orders=bond_orders, environment=env, source=str(path), notes=tuple(notes))


def read_ligand_file(path: str | Path) -> tuple[struc.AtomArray, Chem.Mol]:
    """Read a ligand SDF/MOL or MOL2 (first molecule; heavy atoms; bond orders and charges from the file).

    Atom names are the MOL2 names when they are unique, else element + running number
    (``C1``, ``C2``, ``N1``); residue ``LIG 1`` in chain ``L``.
    """
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
    if mol is None or mol.GetNumAtoms() == 0:
        raise StructureError(f"{path}: RDKit cannot read or sanitize the ligand")
    if any(a.GetNumRadicalElectrons() for a in mol.GetAtoms()):
        raise StructureError(f"{path}: the ligand has radical atoms (a MOL2 file needs its hydrogens for RDKit "
                             "to work out charges and bond orders)")
    mol = Chem.RemoveHs(mol)
    n = mol.GetNumAtoms()
    arr = struc.AtomArray(n)
    arr.coord = mol.GetConformer().GetPositions().astype(np.float32)
    names = [a.GetProp("_TriposAtomName").strip() if a.HasProp("_TriposAtomName") else "" for a in mol.GetAtoms()]
    if "" in names or len(set(names)) < n:
        # No names (SDF) or not unique (e.g. Open Babel's element-only MOL2 names): number them per element.
        counts: Counter = Counter()
        names = []
        for atom in mol.GetAtoms():
            counts[atom.GetSymbol()] += 1
            names.append(f"{atom.GetSymbol().upper()}{counts[atom.GetSymbol()]}")
    for atom, nm in zip(mol.GetAtoms(), names):
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
