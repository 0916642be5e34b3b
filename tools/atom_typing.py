"""H-bond donor/acceptor typing of the pocket (residue templates) and the ligand (CCD bond orders).

Both sides become a :class:`TypedSide`: coordinates, elements, IDATM types (Meng & Lewis
1991, as ChimeraX uses them), heavy-atom neighbours, optional explicit hydrogens, and the
donor and acceptor groups (ids of ``knowledge/hbond_criteria.yaml``) of every polar atom.

* Pocket residues are typed from ``knowledge/residue_templates.yaml``, with ChimeraX's
  context rules: a backbone N that starts a pocket fragment is an N3+ ammonium, a backbone
  O without a following residue is a ketone-like O, OXT makes a carboxylate, and an atom
  missing a template heavy neighbour is skipped, but for a backbone O: a residue rebuilt from
  pictures can lose its C while its O is drawn, and the O is a carbonyl O all the same (typed as
  a ketone O, with no angle to measure from it; a real entry's whole-residue pocket never lacks
  the C: none of the 347 shared entries). Image-only T9, PyMOL, 20 test items: 7d5c's
  ``PRO 46 O, N27`` found (fresh, ``eval/results/image_hbonds.md``).
* The ligand is typed from its RDKit molecule (CCD bond orders and charges) with the
  heavy-atom conventions of Meng & Lewis (aliphatic amines N3+, carboxylic acids as
  carboxylates), then its groups are perceived in ChimeraX's order (first match wins,
  non-ring groups before ring groups, generic fallbacks last).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Mapping, Sequence

import numpy as np
import biotite.structure as struc
from rdkit import Chem

from misi_agent.knowledge.hbonds import ResidueTemplates, load_templates
from misi_agent.tools.geometry import Vec, distance

PEPTIDE_BOND_MAX = 2.0   # Å: C(i-1)–N(i) closer than this counts as a peptide bond
BOND_MAX = 2.3           # Å: longer "bonds" from the file are ignored (chain gaps)
TETRAHEDRAL, PLANAR = 4, 3


@dataclass(frozen=True)
class AcceptorSite:
    """An acceptor atom, its group and the atoms its geometry test refers to.

    ``syn``/``plane``: the syn atom and the plane atom of syn/anti groups; ``partner``: the
    atom upsilon is measured from in theta_tau groups (None: from the lone pairs).
    """

    index: int
    group: str
    syn: int | None = None
    plane: int | None = None
    partner: int | None = None


@dataclass(frozen=True)
class DonorSite:
    """A donor atom and its group."""

    index: int
    group: str


@dataclass
class TypedSide:
    """One side of the complex (pocket or ligand) typed for H-bond tests.

    ``neighbors`` are heavy-atom neighbours within the side; ``hydrogens`` maps an atom to
    its explicit hydrogens (None: no explicit hydrogens on this side).
    """

    side: str
    xyz: list[Vec]
    elements: list[str]
    names: list[str]
    types: list[str]
    neighbors: list[tuple[int, ...]]
    hydrogens: dict[int, tuple[Vec, ...]] | None
    donors: dict[int, DonorSite] = field(default_factory=dict)
    acceptors: dict[int, AcceptorSite] = field(default_factory=dict)
    skipped: set[int] = field(default_factory=set)

    def explicit_h(self, i: int) -> tuple[Vec, ...]:
        """Explicit hydrogens of atom ``i`` (empty when none are given)."""
        if self.hydrogens is None:
            return ()
        return self.hydrogens.get(i, ())

    def n_bonds(self, i: int) -> int:
        """Heavy neighbours plus explicit hydrogens of atom ``i``."""
        return len(self.neighbors[i]) + len(self.explicit_h(i))

    def bonded_xyz(self, i: int) -> list[Vec]:
        """Positions of every bonded atom of ``i`` (heavy neighbours, then explicit H)."""
        return [self.xyz[j] for j in self.neighbors[i]] + list(self.explicit_h(i))


def element_symbol(el: str) -> str:
    """'CL' -> 'Cl'."""
    el = str(el).strip()
    return el[:1].upper() + el[1:].lower()


def _neighbor_lists(n: int, pairs: Sequence[tuple[int, int]]) -> list[tuple[int, ...]]:
    nb: list[list[int]] = [[] for _ in range(n)]
    for a, b in pairs:
        if b not in nb[a]:
            nb[a].append(b)
            nb[b].append(a)
    return [tuple(sorted(x)) for x in nb]


# ----------------------------------------------------------------------------- pocket


@lru_cache(maxsize=64)
def _template_neighbors(residue: str) -> dict[str, frozenset[str]]:
    """Heavy-atom neighbours of each atom in the CCD definition of ``residue`` (OXT ignored)."""
    from misi_agent.structure import ccd_template

    tmpl = ccd_template(residue)
    if tmpl is None or tmpl.bonds is None:
        return {}
    names = [str(n) for n in tmpl.atom_name]
    out: dict[str, set[str]] = {n: set() for n in names}
    for a, b, _ in tmpl.bonds.as_array():
        na, nb = names[a], names[b]
        if "OXT" in (na, nb):
            continue
        out[na].add(nb)
        out[nb].add(na)
    return {k: frozenset(v) for k, v in out.items()}


def _pocket_bonds(pocket: struc.AtomArray, xyz: np.ndarray) -> list[tuple[int, int]]:
    if pocket.bonds is not None and pocket.bonds.get_bond_count() > 0:
        arr = pocket.bonds.as_array()[:, :2]
    else:
        arr = struc.connect_via_residue_names(pocket, inter_residue=False).as_array()[:, :2]
    pairs = []
    for a, b in arr:
        a, b = int(a), int(b)
        if np.linalg.norm(xyz[a] - xyz[b]) <= BOND_MAX:
            pairs.append((a, b))
    return pairs


def type_pocket(cx, hydrogens: Mapping[int, tuple[Vec, ...]] | None = None,
                templates: ResidueTemplates | None = None) -> TypedSide:
    """Type every pocket atom from the residue templates (see module docstring).

    ``hydrogens`` (explicit, complete protonation) refines His tautomers, protonated
    Asp/Glu and neutral Lys; without it the heavy-atom conventions of ChimeraX apply.
    """
    tmpl = templates or load_templates()
    p = cx.pocket
    n = p.array_length()
    coords = p.coord.astype(float)
    xyz = [tuple(map(float, c)) for c in coords]
    names = [str(a) for a in p.atom_name]
    resn = [str(r) for r in p.res_name]
    elements = [element_symbol(e) for e in p.element]
    pairs = _pocket_bonds(p, coords)
    starts = list(struc.get_residue_starts(p)) + [n]
    res_atoms: list[dict[str, int]] = []
    res_of = np.zeros(n, dtype=int)
    for r, (a, b) in enumerate(zip(starts[:-1], starts[1:])):
        res_atoms.append({names[i]: i for i in range(a, b)})
        res_of[a:b] = r
    # peptide links between consecutive pocket residues of one chain (distance decides)
    prev_link: dict[int, int] = {}   # N index -> C index of the previous residue
    next_link: dict[int, int] = {}   # C index -> N index of the next residue
    for r in range(1, len(res_atoms)):
        c = res_atoms[r - 1].get("C")
        nn = res_atoms[r].get("N")
        if c is None or nn is None or str(p.chain_id[c]) != str(p.chain_id[nn]):
            continue
        if distance(xyz[c], xyz[nn]) <= PEPTIDE_BOND_MAX:
            prev_link[nn] = c
            next_link[c] = nn
    pairs = [(a, b) for a, b in pairs if res_of[a] == res_of[b] or (names[a], names[b]) == ("SG", "SG")]
    pairs += list(prev_link.items())
    neighbors = _neighbor_lists(n, pairs)
    side = TypedSide("pocket", xyz, elements, names, ["?"] * n, neighbors,
                     dict(hydrogens) if hydrogens is not None else None)
    explicit = hydrogens is not None

    for r, atoms in enumerate(res_atoms):
        rname = resn[next(iter(atoms.values()))]
        base = tmpl.bases.get(rname, rname)
        tneigh = _template_neighbors(base)
        has_oxt = "OXT" in atoms
        for name, i in atoms.items():
            at = tmpl.atom(rname, name)
            if at is None and name in ("N", "CA", "C", "O", "OXT") and rname not in tmpl.residues:
                at = tmpl.backbone.get(name)   # modified amino acid: at least its backbone
            if at is None:
                side.types[i] = elements[i]
                continue
            side.types[i] = at.type
            donor, acceptor = at.donor, at.acceptor
            # truncated side chains: a template heavy neighbour is missing (a backbone O without its C stays a
            # carbonyl O, typed below as a ketone O: a residue rebuilt from pictures can lose its C)
            if tneigh and name in tneigh and name != "O" and any(t not in atoms for t in tneigh[name]):
                side.skipped.add(i)
                continue
            if name == "N" and i not in prev_link and at.type == "Npl":
                side.types[i] = "N3+"
                heavy = len(neighbors[i])
                donor = "ammonium" if heavy == 1 else ("ammonium_secondary" if heavy == 2 else None)
                acceptor = None
            elif name == "N" and donor == "amide_nh":
                c = prev_link[i]
                prev = res_atoms[res_of[c]]
                if "O" not in prev:
                    donor = "generic_npl_1h"
            if name in ("C", "O", "OXT") and has_oxt:
                if name == "C":
                    side.types[i] = "Cac"
                else:
                    side.types[i] = "O2-"
                    acceptor = "carboxylate"
            elif name == "O" and at.acceptor == "amide_o":
                c = atoms.get("C")
                if c is None or c not in next_link:
                    acceptor = "ketone_o"
            if explicit:
                donor, acceptor = _explicit_residue_rules(side, rname, name, i, atoms, donor, acceptor)
            if donor:
                side.donors[i] = DonorSite(i, donor)
            if acceptor:
                side.acceptors[i] = AcceptorSite(i, acceptor)
    if explicit:
        _explicit_acid_types(side, res_atoms, resn)
    _fill_acceptor_refs(side)
    return side


def _explicit_residue_rules(side: TypedSide, rname: str, name: str, i: int, atoms: dict[str, int],
                            donor: str | None, acceptor: str | None) -> tuple[str | None, str | None]:
    """Protonation seen in explicit hydrogens (ChimeraX types atoms from their hydrogens)."""
    nh = len(side.explicit_h(i))
    if rname in ("HIS", "HID", "HIE", "HIP") and name in ("ND1", "NE2"):
        if nh:
            side.types[i] = "Npl"
            return "ring5_nh", None
        side.types[i] = "N2"
        return None, "ring5_asym_n"
    if rname in ("LYS", "LYN") and name == "NZ" and nh < 3:
        side.types[i] = "N3"
        return ("amine_primary" if nh else None), "amine_primary"
    if rname in ("ASP", "GLU", "ASH", "GLH") and name in ("OD1", "OD2", "OE1", "OE2") and nh:
        side.types[i] = "O3"
        return "generic_o", "generic_o3_one_bond"
    return donor, acceptor


def _explicit_acid_types(side: TypedSide, res_atoms: list[dict[str, int]], resn: list[str]) -> None:
    """A protonated Asp/Glu: C becomes C2 and the other O a carboxylic-acid C=O."""
    for atoms in res_atoms:
        rname = resn[next(iter(atoms.values()))]
        pairs = {"ASP": ("CG", "OD1", "OD2"), "ASH": ("CG", "OD1", "OD2"),
                 "GLU": ("CD", "OE1", "OE2"), "GLH": ("CD", "OE1", "OE2")}.get(rname)
        if not pairs or any(a not in atoms for a in pairs):
            continue
        c, o1, o2 = (atoms[a] for a in pairs)
        prot = [o for o in (o1, o2) if side.explicit_h(o)]
        if len(prot) != 1:
            continue
        other = o2 if prot[0] == o1 else o1
        side.types[c] = "C2"
        side.types[other] = "O2"
        if other in side.acceptors:
            side.acceptors[other] = AcceptorSite(other, "carboxylic_acid_o")
        side.donors.pop(other, None)


# ----------------------------------------------------------------------------- ligand


def ligand_idatm_types(mol: Chem.Mol, protonated_o: set[int] | None = None,
                       hcounts: Mapping[int, int] | None = None) -> list[str]:
    """IDATM types of the ligand's heavy atoms from bond orders (Meng & Lewis conventions).

    Without explicit hydrogens the heavy-atom conventions apply (a carboxylic acid is a
    carboxylate, an aliphatic amine is N3+). ``protonated_o`` (oxygens carrying explicit H)
    and ``hcounts`` (explicit H per atom) refine acids and amines when hydrogens are given.
    """
    protonated_o = protonated_o or set()
    n = mol.GetNumAtoms()
    types = [""] * n
    heavy_nb = [[x.GetIdx() for x in a.GetNeighbors() if x.GetAtomicNum() > 1] for a in mol.GetAtoms()]

    def bond_info(a: Chem.Atom) -> tuple[int, int, bool]:
        dbl = tpl = 0
        arom = False
        for b in a.GetBonds():
            o = b.GetOtherAtom(a)
            if o.GetAtomicNum() <= 1:
                continue
            bt = b.GetBondType()
            if bt == Chem.BondType.DOUBLE:
                dbl += 1
            elif bt == Chem.BondType.TRIPLE:
                tpl += 1
            elif bt == Chem.BondType.AROMATIC:
                arom = True
        return dbl, tpl, arom

    def unsaturated(j: int) -> bool:
        a = mol.GetAtomWithIdx(j)
        dbl, tpl, arom = bond_info(a)
        return a.GetIsAromatic() or arom or dbl > 0 or tpl > 0

    def free_o(a: Chem.Atom, skip_protonated: bool) -> int:
        c = 0
        for j in heavy_nb[a.GetIdx()]:
            if mol.GetAtomWithIdx(j).GetAtomicNum() == 8 and len(heavy_nb[j]) == 1:
                if skip_protonated and j in protonated_o:
                    continue
                c += 1
        return c

    # pass 1: everything but terminal chalcogens' dependence
    for a in mol.GetAtoms():
        i = a.GetIdx()
        z = a.GetAtomicNum()
        heavy = len(heavy_nb[i])
        dbl, tpl, arom = bond_info(a)
        charge = a.GetFormalCharge()
        if z == 6:
            if a.GetIsAromatic():
                types[i] = "Car"
            elif tpl or dbl >= 2:
                types[i] = "C1"
            elif dbl == 1 or arom:
                types[i] = "Cac" if free_o(a, True) >= 2 else "C2"
            else:
                types[i] = "C3"
        elif z == 7:
            types[i] = _nitrogen_type(mol, a, heavy_nb, heavy, dbl, tpl, charge, unsaturated, free_o)
        elif z == 16:
            if a.GetIsAromatic():
                types[i] = "Sar"
            elif heavy == 4:
                fo = free_o(a, False)
                types[i] = "Sac" if fo >= 3 else ("Son" if fo >= 1 else "S")
            elif heavy == 3:
                has_o = any(mol.GetAtomWithIdx(j).GetAtomicNum() == 8 for j in heavy_nb[i])
                types[i] = "Sxd" if has_o else "S3+"
            elif dbl:
                types[i] = "S2"
            elif charge < 0 and heavy == 1:
                types[i] = "S3-"
            else:
                types[i] = "S3"
        elif z == 15:
            if heavy == 4:
                fo = free_o(a, False)
                types[i] = "Pac" if fo >= 2 else ("Pox" if fo == 1 else "P3+")
            else:
                types[i] = "P"
        elif z == 8:
            types[i] = "O?"
        else:
            types[i] = element_symbol(a.GetSymbol())
    # pass 2: oxygens (they depend on their neighbour's type)
    for a in mol.GetAtoms():
        i = a.GetIdx()
        if types[i] != "O?":
            continue
        heavy = len(heavy_nb[i])
        dbl, tpl, arom = bond_info(a)
        if a.GetIsAromatic():
            types[i] = "Oar"
            continue
        if heavy == 0:
            types[i] = "O3"
            continue
        if heavy >= 2:
            types[i] = "O3"
            continue
        partner = types[heavy_nb[i][0]]
        if i in protonated_o:
            types[i] = "O3"
        elif partner in ("Cac", "Ntr", "N1+"):
            types[i] = "O2-"
        elif partner in ("Sac", "Pac", "N3+"):
            types[i] = "O3-"
        elif dbl:
            types[i] = "O2"
        elif partner in ("Son", "Sxd", "Pox"):
            types[i] = "O3-"
        elif a.GetFormalCharge() < 0:
            types[i] = "O3-"
        else:
            types[i] = "O3"
    if hcounts is not None:
        for i, t in enumerate(types):
            if t == "N3+" and len(heavy_nb[i]) + hcounts.get(i, 0) < 4:
                types[i] = "N3"
    return types


def _nitrogen_type(mol, a, heavy_nb, heavy, dbl, tpl, charge, unsaturated, free_o) -> str:
    i = a.GetIdx()
    if tpl:
        return "N1"
    if free_o(a, False) >= 2 and (dbl or charge > 0):
        return "Ntr"
    if heavy == 4:
        return "N3+"
    if a.GetIsAromatic():
        if heavy >= 3 or a.GetTotalNumHs() > 0 or charge > 0:
            return "Npl"
        return "N2"
    if _is_amidine_n(mol, i, heavy_nb):
        return "Ng+"
    if dbl:
        return "N2+" if charge > 0 and heavy == 3 else "N2"
    for j in heavy_nb[i]:
        nb = mol.GetAtomWithIdx(j)
        if unsaturated(j):
            return "Npl"
        if nb.GetAtomicNum() in (15, 16) and any(
                mol.GetAtomWithIdx(k).GetAtomicNum() == 8 and len(heavy_nb[k]) == 1 for k in heavy_nb[j]):
            return "Npl"
    if all(mol.GetAtomWithIdx(j).GetAtomicNum() == 6 for j in heavy_nb[i]):
        return "N3+"
    return "N3"


def _is_amidine_n(mol: Chem.Mol, i: int, heavy_nb: list[list[int]]) -> bool:
    """N of an amidine/guanidine: bonded to a non-aromatic sp2 carbon with ≥2 N and no C=O/C=S."""
    a = mol.GetAtomWithIdx(i)
    if a.GetIsAromatic() or len(heavy_nb[i]) > 2:
        return False
    for j in heavy_nb[i]:
        c = mol.GetAtomWithIdx(j)
        if c.GetAtomicNum() != 6 or c.GetIsAromatic():
            continue
        n_count = 0
        ok = True
        has_cn_double = False
        for b in c.GetBonds():
            o = b.GetOtherAtom(c)
            if o.GetAtomicNum() == 7 and not o.GetIsAromatic():
                n_count += 1
                if b.GetBondType() == Chem.BondType.DOUBLE:
                    has_cn_double = True
            elif o.GetAtomicNum() in (8, 16) and b.GetBondType() == Chem.BondType.DOUBLE:
                ok = False
        if ok and has_cn_double and n_count >= 2:
            # each N of the amidine must carry at most one other heavy atom besides C
            return all(len(heavy_nb[k]) <= 2 for k in heavy_nb[j] if mol.GetAtomWithIdx(k).GetAtomicNum() == 7)
    return False


def type_ligand(cx, hydrogens: Mapping[int, tuple[Vec, ...]] | None = None,
                templates: ResidueTemplates | None = None) -> TypedSide:
    """Type the ligand from ``cx.ligand_mol`` (CCD bond orders) and perceive its groups."""
    tmpl = templates or load_templates()
    mol = cx.ligand_mol
    lig = cx.ligand
    n = lig.array_length()
    if mol.GetNumAtoms() != n:
        raise ValueError(f"ligand molecule has {mol.GetNumAtoms()} atoms, the ligand {n}")
    xyz = [tuple(map(float, c)) for c in lig.coord.astype(float)]
    names = [str(a) for a in lig.atom_name]
    elements = [element_symbol(e) for e in lig.element]
    pairs = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()]
    neighbors = _neighbor_lists(n, pairs)
    protonated_o = None
    hcounts = None
    if hydrogens is not None:
        hcounts = {i: len(h) for i, h in hydrogens.items()}
        protonated_o = {i for i, h in hydrogens.items() if h and elements[i] == "O"}
    types = ligand_idatm_types(mol, protonated_o, hcounts)
    side = TypedSide("ligand", xyz, elements, names, types, neighbors,
                     dict(hydrogens) if hydrogens is not None else None)
    side.skipped = _truncated_ligand_atoms(cx, names, neighbors)
    ri = mol.GetRingInfo()
    rings = [tuple(r) for r in ri.AtomRings()]
    aromatic_ring = [all(mol.GetAtomWithIdx(k).GetIsAromatic() for k in r) for r in rings]
    perceive_groups(side, rings, aromatic_ring, tmpl)
    return side


def _truncated_ligand_atoms(cx, names: list[str], neighbors: list[tuple[int, ...]]) -> set[int]:
    """Ligand atoms missing a heavy neighbour of their CCD definition (unresolved atoms)."""
    if cx.bond_orders != "ccd":
        return set()
    tn = _template_neighbors_ccd(cx.ligand_code)
    if not tn or not all(nm in tn for nm in names):
        return set()
    present = set(names)
    return {i for i, nm in enumerate(names) if any(t not in present for t in tn[nm])}


@lru_cache(maxsize=256)
def _template_neighbors_ccd(code: str) -> dict[str, frozenset[str]]:
    from misi_agent.structure import ccd_template

    tmpl = ccd_template(code)
    if tmpl is None or tmpl.bonds is None:
        return {}
    names = [str(x) for x in tmpl.atom_name]
    out: dict[str, set[str]] = {x: set() for x in names}
    for a, b, _ in tmpl.bonds.as_array():
        out[names[a]].add(names[b])
        out[names[b]].add(names[a])
    return {k: frozenset(v) for k, v in out.items()}


# ----------------------------------------------------------------------------- group perception


def perceive_groups(side: TypedSide, rings: list[tuple[int, ...]], aromatic_ring: list[bool],
                    templates: ResidueTemplates) -> None:
    """Assign donor and acceptor groups to a typed side in ChimeraX's order (first match wins)."""
    info = templates.atom_types
    T = side.types
    nb = side.neighbors
    el = side.elements
    n = len(T)
    geom = lambda j: info.get(T[j], (0, 0))[0]
    tet = lambda j: geom(j) == TETRAHEDRAL
    ring_of: list[list[int]] = [[] for _ in range(n)]
    for r, ring in enumerate(rings):
        for k in ring:
            ring_of[k].append(r)
    nbonds = side.n_bonds
    has_h = lambda i: len(side.explicit_h(i)) > 0

    def others(c: int, i: int) -> list[int]:
        return [k for k in nb[c] if k != i]

    # --- acceptors (non-ring groups first; ring groups; generic fallbacks)
    acc: dict[int, str] = {}

    def set_acc(i: int, g: str) -> None:
        if i not in acc and i not in side.skipped:
            acc[i] = g

    for i in range(n):
        t = T[i]
        if i in side.skipped:
            continue
        if t == "O3-" and len(nb[i]) == 1 and T[nb[i][0]] == "Pac":
            p = nb[i][0]
            rest = others(p, i)
            o3m = [k for k in rest if T[k] == "O3-"]
            non = [k for k in rest if T[k] != "O3-"]
            if len(nb[p]) == 4 and len(o3m) >= 1 and all(tet(k) for k in non):
                set_acc(i, "phosphate_o")
        elif t == "O2-" and len(nb[i]) == 1 and T[nb[i][0]] == "Cac":
            c = nb[i][0]
            rest = others(c, i)
            o2m = [k for k in rest if T[k] == "O2-" and len(nb[k]) == 1 and not has_h(k)]
            non = [k for k in rest if k not in o2m]
            if len(o2m) == 1 and len(non) <= 1 and all(tet(k) for k in non) and nbonds(c) <= 3:
                set_acc(i, "carboxylate")
        elif t == "S2" and len(nb[i]) == 1 and el[nb[i][0]] == "C":
            set_acc(i, "thiocarbonyl_s")
        elif t == "O2" and len(nb[i]) == 1 and el[nb[i][0]] == "C":
            c = nb[i][0]
            rest = others(c, i)
            if T[c] == "C2":
                o3h = [k for k in rest if T[k] == "O3" and len(nb[k]) == 1]
                npl = [k for k in rest if T[k] == "Npl"]
                if o3h and nbonds(c) <= 3 and all(tet(k) for k in rest if k not in o3h[:1]) and has_h(o3h[0]):
                    set_acc(i, "carboxylic_acid_o")
                elif npl and nbonds(c) <= 3 and all(tet(k) for k in rest if k != npl[0]):
                    set_acc(i, "amide_o")
                elif 1 <= len(rest) <= 2 and nbonds(c) <= 3 and el[rest[0]] == "C" and all(el[k] == "C" for k in rest):
                    set_acc(i, "ketone_o")
                elif len(rest) == 2 and nbonds(c) == 3:
                    o3 = [k for k in rest if T[k] == "O3" and len(nb[k]) == 2
                          and all(tet(m) for m in others(k, c))]
                    cc = [k for k in rest if el[k] == "C"]
                    if o3 and cc:
                        set_acc(i, "ester_o")
        elif t == "O2-" and len(nb[i]) == 1 and T[nb[i][0]] == "Ntr":
            c = nb[i][0]
            rest = [k for k in others(c, i) if T[k] != "O2-"]
            if len(nb[c]) <= 3 and all(tet(k) for k in rest):
                set_acc(i, "nitro_o")
        elif t == "O2" and len(nb[i]) == 1 and T[nb[i][0]] == "Son":
            s = nb[i][0]
            rest = others(s, i)
            o2 = [k for k in rest if T[k] == "O2"]
            non = [k for k in rest if T[k] != "O2"]
            if len(o2) == 1 and len(non) == 2 and all(tet(k) for k in non):
                set_acc(i, "sulfone_o")
        elif t == "O3" and len(nb[i]) == 2 and any(T[k] == "Pac" for k in nb[i]):
            p = next(k for k in nb[i] if T[k] == "Pac")
            rest = others(p, i)
            if len(nb[p]) == 4 and sum(T[k] == "O3-" for k in rest) >= 2 and all(
                    tet(k) for k in rest if T[k] != "O3-"):
                set_acc(i, "phosphate_ester_o")
        elif t == "O2" and len(nb[i]) == 1 and T[nb[i][0]] == "Pox":
            set_acc(i, "phosphoryl_o")
        elif t == "O2" and len(nb[i]) == 1 and T[nb[i][0]] == "Sxd":
            set_acc(i, "sulfoxide_o")
    for i in range(n):
        if i in acc or i in side.skipped:
            continue
        t = T[i]
        heavy = nb[i]
        if t == "N3" and len(heavy) == 1 and tet(heavy[0]) and nbonds(i) <= 3:
            set_acc(i, "amine_primary")
        elif t == "O3" and len(heavy) == 1 and nbonds(i) <= 2 and tet(heavy[0]) and T[heavy[0]] not in ("Sac", "Pac"):
            set_acc(i, "hydroxyl")
        elif t == "O3" and len(heavy) == 2 and any(T[k] == "Sac" for k in heavy):
            s = next(k for k in heavy if T[k] == "Sac")
            other = next(k for k in heavy if k != s)
            rest = others(s, i)
            if T[other] != "Pac" and len(nb[s]) == 4 and sum(T[k] == "O3-" for k in rest) >= 2:
                set_acc(i, "sulfate_ester_o")
        elif t == "N3" and len(heavy) == 3 and all(tet(k) for k in heavy):
            set_acc(i, "amine_tertiary")
        elif t == "N1" and len(heavy) == 1 and T[heavy[0]] == "C1":
            set_acc(i, "nitrile_n")
        elif t == "N3" and len(heavy) == 2 and all(tet(k) for k in heavy) and nbonds(i) <= 3:
            set_acc(i, "amine_secondary")
        elif t == "O3" and len(heavy) == 1 and T[heavy[0]] == "Car" and nbonds(i) <= 2:
            set_acc(i, "phenol")
        elif t in ("Npl", "N3") and len(heavy) == 1 and T[heavy[0]] == "Car" and nbonds(i) <= 3:
            set_acc(i, "aniline_n")
        elif t == "O3" and not ring_of[i] and len(heavy) == 2 and nbonds(i) == 2 and all(el[k] == "C" for k in heavy):
            set_acc(i, "ether_o")
        elif t == "N2" and not ring_of[i] and len(heavy) == 2 and nbonds(i) == 2 and all(el[k] == "C" for k in heavy):
            set_acc(i, "imine_n")
    # ring acceptors
    for i in range(n):
        if i in acc or i in side.skipped:
            continue
        t = T[i]
        if len(ring_of[i]) == 1 and nbonds(i) == 2 and len(nb[i]) == 2:
            ring = rings[ring_of[i][0]]
            if t == "N2" and len(ring) == 6:
                sym = _ring6_symmetric(i, ring, nb, el)
                set_acc(i, "ring6_sym_n" if sym else "ring6_asym_n")
            elif (t == "N2" or t in ("Npl", "N2+")) and len(ring) == 5:
                if t != "N2" and not any(el[k] == "N" for k in ring if k != i):
                    continue
                sym = _ring5_symmetric(i, ring, nb, el)
                set_acc(i, "ring5_sym_n" if sym else "ring5_asym_n")
        if i not in acc and el[i] == "O" and any(len(rings[r]) == 5 for r in ring_of[i]):
            set_acc(i, "ring5_o")
    # generic acceptors
    for i in range(n):
        if i in acc or i in side.skipped:
            continue
        g = _generic_acceptor(side, i, geom)
        if g:
            set_acc(i, g)
    for i, g in acc.items():
        side.acceptors[i] = AcceptorSite(i, g)

    # --- donors
    don: dict[int, str] = {}
    for i in range(n):
        if i in side.skipped:
            continue
        t = T[i]
        heavy = nb[i]
        nh_ok = lambda total: nbonds(i) <= total
        g = None
        if t == "Npl" and len(heavy) == 1 and T[heavy[0]] == "C2" and nh_ok(3):
            c = heavy[0]
            rest = others(c, i)
            if len(rest) <= 2 and nbonds(c) <= 3 and all(tet(k) for k in rest):
                g = "iminium_nh2"
        if g is None and t == "Ng+" and len(heavy) == 1 and T[heavy[0]] == "C2" and nh_ok(3):
            g = "guanidinium"
        if g is None and t == "N3+" and len(heavy) == 1 and tet(heavy[0]):
            g = "ammonium"
        if g is None and t == "O3" and len(heavy) == 1 and tet(heavy[0]) and nh_ok(2):
            g = "hydroxyl"
        if g is None and el[i] == "N" and len(heavy) == 1 and T[heavy[0]] == "C2" and nh_ok(3):
            c = heavy[0]
            rest = others(c, i)
            if any(T[k] == "O2" for k in rest) and nbonds(c) <= 3 and all(
                    tet(k) for k in rest if T[k] != "O2"):
                g = "amide_nh2"
        if g is None and t == "Npl" and len(heavy) == 1 and T[heavy[0]] == "Car" and not any(
                aromatic_ring[r] for r in ring_of[i]):
            g = "aniline_nh2"
        if g is None and t == "O3" and len(heavy) == 1 and T[heavy[0]] == "Car" and nh_ok(2):
            g = "phenol"
        if g is None and t == "N3" and len(heavy) == 1 and tet(heavy[0]) and nh_ok(3):
            g = "amine_primary"
        if g is None and t == "Npl" and len(heavy) == 2 and nh_ok(3):
            tets = [k for k in heavy if tet(k)]
            pls = [k for k in heavy if geom(k) == PLANAR]
            if len(tets) == 1 and len(pls) == 1:
                x = pls[0]
                rest = others(x, i)
                if len(rest) <= 2 and all(tet(k) for k in rest) and len(rest) == 2:
                    g = "charged_npl_nh"
        if g is None and t == "N3+" and len(heavy) == 2 and all(tet(k) for k in heavy):
            g = "ammonium_secondary"
        if g is None and el[i] == "N" and len(heavy) == 2 and nh_ok(3):
            c2 = [k for k in heavy if T[k] == "C2"]
            tt = [k for k in heavy if tet(k)]
            for c in c2:
                rest = others(c, i)
                if (tt and tt[0] != c and any(T[k] == "O2" for k in rest) and nbonds(c) <= 3
                        and all(tet(k) for k in rest if T[k] != "O2")):
                    g = "amide_nh"
                    break
        if g is None and t == "N3+" and len(heavy) == 3 and all(tet(k) for k in heavy):
            g = "ammonium_tertiary"
        if g is None and t == "N2" and len(heavy) == 1 and geom(heavy[0]) == PLANAR:
            g = "imine_nh"
        if g is None and t == "N3" and len(heavy) == 2 and all(tet(k) for k in heavy) and nh_ok(3):
            g = "amine_secondary"
        if g:
            don[i] = g
    # ring NH donors
    for i in range(n):
        if i in don or i in side.skipped:
            continue
        t = T[i]
        if t not in ("Npl", "N2+") or len(ring_of[i]) != 1:
            continue
        if nbonds(i) == 3 and not has_h(i):
            continue
        ring = rings[ring_of[i][0]]
        if len(ring) == 5:
            don[i] = "ring5_nh"
            for k in ring:
                if T[k] == "N2" and k not in don and k not in side.skipped:
                    don[k] = "ring5_nh"
        elif len(ring) == 6 and aromatic_ring[ring_of[i][0]]:
            don[i] = "ring6_nh"
    # generic donors
    for i in range(n):
        if i in don or i in side.skipped or el[i] not in ("N", "O", "S"):
            continue
        subs = info.get(T[i], (0, 0))[1]
        if T[i] == "Npl" and nbonds(i) == 2 and has_h(i):
            continue
        if nbonds(i) < subs or has_h(i):
            if T[i] in ("Npl", "N2+"):
                don[i] = "generic_npl_1h" if len(nb[i]) > 1 else "generic_npl_2h"
            else:
                don[i] = {"N": "generic_n", "O": "generic_o", "S": "generic_s"}[el[i]]
    for i, g in don.items():
        side.donors[i] = DonorSite(i, g)
    _fill_acceptor_refs(side)


def _ring5_symmetric(i: int, ring: tuple[int, ...], nb, el) -> bool:
    b1, b2 = nb[i][0], nb[i][1]
    rem = [k for k in ring if k not in (i, b1, b2)]
    return el[b1] == el[b2] and len(rem) == 2 and el[rem[0]] == el[rem[1]]


def _ring6_symmetric(i: int, ring: tuple[int, ...], nb, el) -> bool:
    b1, b2 = nb[i][0], nb[i][1]
    n1 = next((k for k in ring if k not in (i, b1, b2) and k in nb[b1]), None)
    n2 = next((k for k in ring if k not in (i, b1, b2, n1) and k in nb[b2]), None)
    return el[b1] == el[b2] and n1 is not None and n2 is not None and el[n1] == el[n2]


def _generic_acceptor(side: TypedSide, i: int, geom: Callable[[int], int]) -> str | None:
    """ChimeraX's generic acceptor for an atom no named group matched (by IDATM type)."""
    t = side.types[i]
    nb = side.neighbors[i]
    first_geom = geom(nb[0]) if nb else None
    if t in ("O2-", "O3-"):
        if not nb:
            return None
        return "generic_o_charged_planar" if first_geom == PLANAR else "generic_o_charged"
    if t == "O2":
        if not nb:
            return None
        if first_geom == PLANAR:
            return "generic_o2_planar"
        if first_geom == TETRAHEDRAL:
            return "generic_o2_tetrahedral"
        return "generic_o"
    if t == "O3":
        k = side.n_bonds(i)
        return {0: "generic_o", 1: "generic_o3_one_bond", 2: "generic_o3_two_bonds"}.get(k)
    if t == "N2":
        return "generic_n2"
    if t == "N3":
        return {0: "generic_n3_no_heavy", 1: "generic_n3_one_heavy"}.get(len(nb), "generic_n3")
    if t == "N1":
        return "generic_n1"
    if t == "S2":
        return "generic_s2"
    if t in ("Sar", "S3-"):
        return "generic_s"
    if side.elements[i] == "O":
        return "generic_o"
    return None


# ----------------------------------------------------------------------------- references


# theta_tau acceptors whose upsilon partner is a named neighbour (None: the heavy neighbour)
_NAMED_PARTNER = {"hydroxyl": None, "phenol": None, "nitrile_n": None, "aniline_n": None, "amine_primary": None,
                  "phosphate_ester_o": "Pac", "sulfate_ester_o": "Sac", "phosphoryl_o": None, "sulfoxide_o": None}
# generic theta_tau acceptors: partner only when the atom has a single bond, else lone pairs
_GENERIC_THETA_TAU = {"generic_o2_tetrahedral", "generic_o3_one_bond", "generic_n3_one_heavy", "generic_n1",
                      "generic_n3"}


def _fill_acceptor_refs(side: TypedSide) -> None:
    """Resolve the syn/plane/partner atoms every acceptor's test refers to."""
    nb = side.neighbors
    T = side.types
    el = side.elements
    out = {}
    for i, site in side.acceptors.items():
        g = site.group
        syn = plane = partner = None
        if g in ("carboxylate", "phosphate_o", "nitro_o", "sulfone_o", "amide_o", "carboxylic_acid_o"):
            if len(nb[i]) != 1:
                continue  # cannot define the plane: not an acceptor of this kind
            plane = nb[i][0]
            rest = [k for k in nb[plane] if k != i]
            if g == "amide_o":
                cand = [k for k in rest if el[k] == "N"]
            elif g == "carboxylic_acid_o":
                cand = [k for k in rest if T[k] == "O3"]
            else:
                cand = [k for k in rest if el[k] == "O" and T[k] == T[i]]
            if not cand:
                # e.g. a lone carboxylate O: fall back to the nearest generic behaviour
                out[i] = AcceptorSite(i, "generic_o_charged_planar" if T[i] == "O2-" else "generic_o2_planar")
                continue
            syn = cand[0]
        elif g in _NAMED_PARTNER:
            want = _NAMED_PARTNER[g]
            partner = next((k for k in nb[i] if want is None or T[k] == want), None)
        elif g in _GENERIC_THETA_TAU:
            if g == "generic_o3_one_bond" and side.n_bonds(i) == 2:
                out[i] = AcceptorSite(i, "generic_o3_two_bonds")
                continue
            if side.n_bonds(i) == 1 and nb[i]:
                partner = nb[i][0]
        out[i] = AcceptorSite(i, g, syn, plane, partner)
    side.acceptors = dict(sorted(out.items()))
