"""Donor/acceptor typing: ligand functional groups from bond orders, pocket residues from templates."""
from __future__ import annotations

from pathlib import Path

import biotite.structure as struc
import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import AllChem

from misi_agent.structure import Complex, ResidueKey, load_complex
from misi_agent.tools.atom_typing import type_ligand, type_pocket

DATA = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"


def ligand_complex(smiles: str) -> Complex:
    """A complex whose ligand is ``smiles`` (3D from RDKit, seed fixed); the pocket is a dummy Gly."""
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    AllChem.EmbedMolecule(mol, randomSeed=7)
    mol = Chem.RemoveHs(mol)
    n = mol.GetNumAtoms()
    arr = struc.AtomArray(n)
    arr.coord = mol.GetConformer().GetPositions().astype(np.float32)
    arr.atom_name = np.array([f"{a.GetSymbol().upper()}{a.GetIdx()}" for a in mol.GetAtoms()])
    arr.element = np.array([a.GetSymbol().upper() for a in mol.GetAtoms()])
    arr.res_name = np.full(n, "UNL")
    arr.chain_id = np.full(n, "L")
    arr.hetero = np.ones(n, bool)
    gly = struc.AtomArray(1)
    gly.coord = np.array([[50.0, 50.0, 50.0]], dtype=np.float32)
    gly.atom_name = np.array(["CA"])
    gly.element = np.array(["C"])
    gly.res_name = np.array(["GLY"])
    return Complex(pdb_id="test", ligand_code="UNL", ligand_key=ResidueKey("L", 0, "", "UNL"), pocket=gly,
                   ligand=arr, ligand_mol=mol, bond_orders="ccd", environment=struc.AtomArray(0), source="smiles")


# smiles -> {atom index: (IDATM type, donor group or None, acceptor group or None)}
CASES = {
    "CC(=O)O": {2: ("O2-", None, "carboxylate"), 3: ("O2-", None, "carboxylate"), 1: ("Cac", None, None)},
    "CC(=O)[O-]": {2: ("O2-", None, "carboxylate"), 3: ("O2-", None, "carboxylate")},
    "CCN": {2: ("N3+", "ammonium", None)},
    "CNC": {1: ("N3+", "ammonium_secondary", None)},
    "CN(C)C": {1: ("N3+", "ammonium_tertiary", None)},
    "C[N+](C)(C)C": {1: ("N3+", None, None)},
    "c1ccncc1": {3: ("N2", None, "ring6_sym_n")},
    "c1cnc[nH]1": {2: ("N2", "ring5_nh", "ring5_asym_n"), 4: ("Npl", "ring5_nh", "ring5_asym_n")},
    "c1ccc2[nH]ccc2c1": {4: ("Npl", "ring5_nh", None)},
    "O=c1cccc[nH]1": {6: ("Npl", "ring6_nh", None), 0: ("O2", None, "generic_o2_planar")},
    "NC(=N)c1ccccc1": {0: ("Ng+", "guanidinium", None), 2: ("Ng+", "guanidinium", None)},
    "NC(=N)N": {0: ("Ng+", "guanidinium", None), 3: ("Ng+", "guanidinium", None)},
    "CC(N)=O": {2: ("Npl", "amide_nh2", None), 3: ("O2", None, "amide_o")},
    "CNC(C)=O": {1: ("Npl", "amide_nh", None), 4: ("O2", None, "amide_o")},
    "NC(N)=O": {0: ("Npl", "generic_npl_2h", None), 3: ("O2", None, "generic_o2_planar")},
    "CC(C)=O": {3: ("O2", None, "ketone_o")},
    "COC(C)=O": {1: ("O3", None, "ether_o"), 4: ("O2", None, "ester_o")},
    "CCO": {2: ("O3", "hydroxyl", "hydroxyl")},
    "Oc1ccccc1": {0: ("O3", "phenol", "phenol")},
    "Nc1ccccc1": {0: ("Npl", "aniline_nh2", "aniline_n")},
    "CC#N": {2: ("N1", None, "nitrile_n")},
    "CS(N)(=O)=O": {1: ("Son", None, None), 2: ("Npl", "generic_npl_2h", None),
                    3: ("O2", None, "generic_o2_tetrahedral")},
    "CS(C)(=O)=O": {3: ("O2", None, "sulfone_o"), 4: ("O2", None, "sulfone_o")},
    "CS(C)=O": {1: ("Sxd", None, None), 3: ("O2", None, "sulfoxide_o")},
    "COP(=O)(O)O": {2: ("Pac", None, None), 1: ("O3", None, "phosphate_ester_o"),
                    3: ("O3-", None, "phosphate_o"), 4: ("O3-", None, "phosphate_o")},
    "[O-][N+](=O)c1ccccc1": {0: ("O2-", None, "generic_o_charged_planar")},
    "[O-][N+](=O)C": {0: ("O2-", None, "nitro_o"), 2: ("O2-", None, "nitro_o")},
    "CSC": {1: ("S3", None, None)},
    "CS": {1: ("S3", "generic_s", None)},
    "CC(C)=S": {3: ("S2", None, "thiocarbonyl_s")},
    "C1CCOC1": {3: ("O3", None, "ring5_o")},
    "C1CCOCC1": {3: ("O3", None, "generic_o3_two_bonds")},
    "CC=NC": {2: ("N2", None, "imine_n")},
    "COS(=O)(=O)[O-]": {1: ("O3", None, "sulfate_ester_o"), 2: ("Sac", None, None)},
    "FC(F)F": {0: ("F", None, None)},
}


@pytest.mark.parametrize("smiles", sorted(CASES))
def test_ligand_groups(smiles):
    side = type_ligand(ligand_complex(smiles))
    for i, (t, donor, acceptor) in CASES[smiles].items():
        got = (side.types[i],
               side.donors[i].group if i in side.donors else None,
               side.acceptors[i].group if i in side.acceptors else None)
        assert got == (t, donor, acceptor), (smiles, i, side.names[i])


def test_acceptor_references_are_resolved():
    side = type_ligand(ligand_complex("CC(=O)O"))
    o1, o2 = side.acceptors[2], side.acceptors[3]
    assert (o1.syn, o1.plane) == (3, 1) and (o2.syn, o2.plane) == (2, 1)
    side = type_ligand(ligand_complex("CC(N)=O"))
    assert (side.acceptors[3].syn, side.acceptors[3].plane) == (2, 1)       # amide: syn atom is the N
    side = type_ligand(ligand_complex("CCO"))
    assert side.acceptors[2].partner == 1
    side = type_ligand(ligand_complex("CN(C)N"))                               # N3 with 3 heavy: lone pair
    assert side.types[1] == "N3" and side.acceptors[1].partner is None


def test_explicit_hydrogens_change_ligand_protonation():
    cx = ligand_complex("CC(=O)O")
    plain = type_ligand(cx)
    assert plain.types[1] == "Cac"
    # an explicit H on O3 makes it a carboxylic acid: C2, C=O acceptor, OH donor
    h = tuple(float(v) for v in cx.ligand.coord[3] + np.array([0.0, 0.0, 0.96]))
    side = type_ligand(cx, hydrogens={3: (h,)})
    assert side.types[1] == "C2" and side.types[2] == "O2" and side.types[3] == "O3"
    assert side.acceptors[2].group == "carboxylic_acid_o" and side.acceptors[2].syn == 3
    assert side.donors[3].group == "generic_o"
    # an amine with two explicit H is neutral (N3): it accepts as well as donates
    cx = ligand_complex("CCN")
    hs = tuple(tuple(float(v) for v in cx.ligand.coord[2] + d) for d in ([0.0, 0.0, 1.0], [0.0, 1.0, 0.0]))
    side = type_ligand(cx, hydrogens={2: hs})
    assert side.types[2] == "N3" and side.donors[2].group == "amine_primary"
    assert side.acceptors[2].group == "amine_primary"


# ----------------------------------------------------------------------------- pocket


@pytest.fixture(scope="module")
def kni():
    return load_complex(DATA / "1hpx.pdb.gz")


def test_pocket_backbone_context(kni):
    side = type_pocket(kni)
    p = kni.pocket
    starts = struc.get_residue_starts(p)
    names = [str(a) for a in p.atom_name]
    ends = list(starts[1:]) + [p.array_length()]
    n_start = n_end = 0
    for k, (a, b) in enumerate(zip(starts, ends)):
        atoms = {names[i]: i for i in range(a, b)}
        prev_c = None
        if k > 0:
            pa, pb = starts[k - 1], starts[k]
            prev_c = next((i for i in range(pa, pb) if names[i] == "C"), None)
        linked = (prev_c is not None and p.chain_id[prev_c] == p.chain_id[a]
                  and np.linalg.norm(p.coord[prev_c] - p.coord[atoms["N"]]) < 2.0)
        n = atoms["N"]
        res = str(p.res_name[a])
        if not linked:
            n_start += 1
            assert side.types[n] == "N3+"
            assert side.donors[n].group == ("ammonium_secondary" if res == "PRO" else "ammonium")
        elif res == "PRO":
            assert n not in side.donors
        else:
            assert side.donors[n].group == "amide_nh"
        if "O" in atoms and k + 1 < len(starts):
            nxt_n = next((i for i in range(ends[k], ends[k + 1] if k + 1 < len(ends) else p.array_length())
                          if names[i] == "N"), None)
            follows = nxt_n is not None and np.linalg.norm(p.coord[atoms["C"]] - p.coord[nxt_n]) < 2.0
            expected = "amide_o" if follows else "ketone_o"
            n_end += not follows
            assert side.acceptors[atoms["O"]].group == expected
            if follows:
                assert side.acceptors[atoms["O"]].syn == nxt_n
    assert n_start >= 2 and n_end >= 2       # the HIV protease pocket has several fragments


def test_pocket_side_chain_roles(kni):
    side = type_pocket(kni)
    p = kni.pocket
    seen = set()
    for i in range(p.array_length()):
        res, name = str(p.res_name[i]), str(p.atom_name[i])
        roles = (i in side.donors, i in side.acceptors)
        if (res, name) in (("ASP", "OD1"), ("ASP", "OD2")):
            assert roles == (False, True) and side.acceptors[i].group == "carboxylate"
        elif (res, name) == ("MET", "SD"):
            assert roles == (False, False)
        elif (res, name) == ("THR", "OG1"):
            assert roles == (True, True)
        elif (res, name) in (("ARG", "NH1"), ("ARG", "NH2")):
            assert roles == (True, False) and side.donors[i].group == "guanidinium"
        else:
            continue
        seen.add(res)
    assert {"ASP", "MET", "THR", "ARG"} <= seen


def test_a_backbone_o_without_its_carbon_still_accepts(kni):
    """A residue rebuilt from pictures can lose its backbone C while its O is drawn: the O is a carbonyl O all the
    same. With Gly 48 (chain B) lacking its C, its O is typed a ketone O (no angle to measure from it) and still
    accepts KNI's N2 (3.16 Å in the entry); an Asp lacking its CG keeps the rule for truncated side chains (its OD1
    and OD2 are neither donors nor acceptors). Whole-residue pockets of real entries never lack a C: none of the
    347 shared PDB entries' pockets has a backbone O without it."""
    from dataclasses import replace

    from misi_agent.tools.hbonds import find_hbonds

    p = kni.pocket
    gone = ((p.chain_id == "B") & (p.res_id == 48) & (p.atom_name == "C")) | \
           ((p.chain_id == "A") & (p.res_id == 25) & (p.atom_name == "CG"))
    assert gone.sum() == 2
    cut = replace(kni, pocket=p[~gone])
    side = type_pocket(cut)
    q = cut.pocket
    at = lambda chain, num, name: int(np.flatnonzero((q.chain_id == chain) & (q.res_id == num)
                                                     & (q.atom_name == name))[0])
    o48 = at("B", 48, "O")
    assert side.acceptors[o48].group == "ketone_o" and not side.neighbors[o48]
    for name in ("OD1", "OD2"):
        k = at("A", 25, name)
        assert k in side.skipped and k not in side.acceptors and k not in side.donors
    bonds = {(hb.chain, hb.residue_number, hb.protein_atom, hb.ligand_atom) for hb in find_hbonds(cut)}
    assert ("B", 48, "O", "N2") in bonds
    assert not any(b[:2] == ("A", 25) for b in bonds)
