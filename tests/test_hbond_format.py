"""MiSI-Bench answer strings for H-bond lists: rendering, parsing, round trips."""
from __future__ import annotations

from pathlib import Path

import pytest

from misi_agent.structure import load_complex
from misi_agent.tools.hbond_format import (AnswerFormatError, format_pocket_ligand, format_residue_answer,
                                           format_residue_ligand, parse_pocket_ligand, parse_residue_ligand,
                                           pocket_keys, residue_keys)
from misi_agent.tools.hbonds import HBond, find_hbonds

DATA = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"


@pytest.fixture(scope="module")
def bonds_7rh3():
    return find_hbonds(load_complex(DATA / "7rh3.cif.gz", "59O"))


def _bond(res, num, atom, chain, lig, ins="", donor="protein"):
    return HBond(residue_name=res, residue_number=num, insertion_code=ins, chain=chain, protein_atom=atom,
                 ligand_atom=lig, donor=donor, donor_atom=atom if donor == "protein" else lig,
                 acceptor_atom=lig if donor == "protein" else atom, distance=3.0, h_distance=None,
                 angles={}, group="x/y", donor_group="x", acceptor_group="y", protein_index=0, ligand_index=0)


def test_pocket_format_protein_first_and_sorted():
    bonds = [_bond("LYS", 47, "NZ", "A", "O1A"), _bond("ARG", 45, "NH2", "A", "O1B", donor="protein")]
    assert format_pocket_ligand(bonds) == "ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A"
    assert format_residue_ligand(bonds) == "ARG NH2, O1B; LYS NZ, O1A"
    assert format_residue_answer(bonds) == "Yes: ARG NH2, O1B; LYS NZ, O1A"
    assert format_residue_answer([]) == "No" and format_pocket_ligand([]) == ""


def test_a_pair_found_in_both_directions_appears_once(bonds_7rh3):
    his = [h for h in bonds_7rh3 if (h.residue_number, h.protein_atom, h.ligand_atom) == (158, "NE2", "O4")]
    assert {h.donor for h in his} == {"protein", "ligand"}
    text = format_pocket_ligand(bonds_7rh3)
    assert text.count("HIS 158 NE2 A, O4") == 1
    assert format_residue_ligand(his) == "HIS NE2, O4"


def test_round_trip_on_real_bonds(bonds_7rh3):
    assert parse_pocket_ligand(format_pocket_ligand(bonds_7rh3)) == pocket_keys(bonds_7rh3)
    assert parse_residue_ligand(format_residue_ligand(bonds_7rh3)) == residue_keys(bonds_7rh3)
    assert parse_residue_ligand(format_residue_answer(bonds_7rh3)) == residue_keys(bonds_7rh3)
    assert len(pocket_keys(bonds_7rh3)) < len(bonds_7rh3)      # the HIS pair collapsed


def test_round_trip_with_insertion_codes_and_blank_chain():
    bonds = [_bond("SER", 195, "OG", "A", "O2", ins="A"), _bond("GLY", -3, "N", "", "N1"),
             _bond("ASP", 189, "OD1", "BB", "N7", donor="ligand")]
    text = format_pocket_ligand(bonds)
    assert "SER 195A OG A, O2" in text and "GLY -3 N, N1" in text
    assert parse_pocket_ligand(text) == pocket_keys(bonds)


def test_parsers_tolerate_spacing_case_and_order():
    a = parse_pocket_ligand("arg 45 nh2 a , o1b ;LYS   47 NZ A,O1A;")
    b = parse_pocket_ligand("LYS 47 NZ A, O1A; ARG 45 NH2 A, O1B")
    assert a == b == {("ARG", 45, "", "NH2", "A", "O1B"), ("LYS", 47, "", "NZ", "A", "O1A")}
    assert parse_pocket_ligand("SER 195a OG A, O2") == {("SER", 195, "A", "OG", "A", "O2")}
    assert parse_residue_ligand("yes:arg nh2,o1b;  Lys NZ , O1A.") == {("ARG", "NH2", "O1B"), ("LYS", "NZ", "O1A")}
    assert parse_residue_ligand("No") == set() and parse_residue_ligand("  no. ") == set()
    assert parse_pocket_ligand("") == set() and parse_pocket_ligand("None") == set()
    assert parse_residue_ligand("HIS NE2, O4'") == {("HIS", "NE2", "O4'")}


def test_malformed_answers():
    with pytest.raises(AnswerFormatError):
        parse_pocket_ligand("ARG NH2 A, O1B")                    # no residue number
    with pytest.raises(AnswerFormatError):
        parse_residue_ligand("Yes: ARG NH2 O1B")                 # no comma
    assert parse_pocket_ligand("ARG NH2 A, O1B; LYS 47 NZ A, O1A", strict=False) == {("LYS", 47, "", "NZ", "A", "O1A")}
    assert parse_residue_ligand("Yes: ARG NH2 O1B; LYS NZ, O1A", strict=False) == {("LYS", "NZ", "O1A")}
