"""Answer parsing: prose, markdown, case, fences, tags, command order, H-bond lists in any form."""
from __future__ import annotations

import pytest
from bench_gold import polar_contacts

from misi_agent.bench.answers import (
    BondItem,
    InteractionAnswer,
    answer_region,
    docking_parts,
    extract_commands,
    format_pocket_answer,
    format_residue_answer,
    parse_bond,
    parse_choice,
    parse_interactions,
    same_motion,
    single_axis,
)
from misi_agent.camera import Command, format_commands, parse_commands


@pytest.mark.parametrize("text,letter", [
    ("C", "C"),
    ("c", "C"),
    ("Answer: C", "C"),
    ("answer: c", "C"),
    ("The answer is (B).", "B"),
    ("**D**", "D"),
    ("**Answer:** A", "A"),
    ("```\nB\n```", "B"),
    ("Final answer: D) the third view", "D"),
    ("I think option D is right.", "D"),
    ("Option (C)", "C"),
    ("A rotation about x was applied twice, so B.", "B"),  # the article "A" is not a choice
    ("Clearly. A small shift fits, hence D", "D"),
    ("<think>A looks close, but no.</think>\n<answer>C</answer>", "C"),
    ("Image 8 and 9 differ. Looking at the chain A LYS 47 label... Answer: B", "B"),
    ("Comparing A with B and C, I'd go with... actually the answer is D", "D"),
    ("Answer: A. move x 3, move y 5", "A"),
    ("Answer: A is the best match", "A"),
])
def test_choice_letters(text, letter):
    assert parse_choice(text) == letter


@pytest.mark.parametrize("text", ["", "   ", "A or B", "(A) and (C) both fit", "I do not know", "E", "Answer:", None, 3])
def test_choice_unreadable(text):
    assert parse_choice(text) is None


OPTIONS = ["move x 3, move y 5", "move x -3, move y 5", "move x 3, move y -5", "move x 2, move y 5"]


@pytest.mark.parametrize("text,letter", [
    ("move x 3, move y 5", "A"),
    ("move y 5, move x 3", "A"),  # another order, same meaning
    ("Answer: `move y -5, move x 3`", "C"),
    ("move x 1, move y 5, move x 1", "D"),
    ("move x 7, move y 5", None),  # matches no option
])
def test_choice_by_commands_for_text_options(text, letter):
    assert parse_choice(text, OPTIONS) == letter


@pytest.mark.parametrize("text,expected", [
    ("move x 3", "move x 3"),
    ("MOVE X 3", "move x 3"),
    ("The scene moved: `move x -2`.", "move x -2"),
    ("Answer: roll y 15°", "roll y 15"),
    ("rotate about the y-axis by -30 degrees", "roll y -30"),
    ("translate along x by 2 Å", "move x 2"),
    ("move x \u22124", "move x -4"),  # unicode minus
    ("move x +3.0", "move x 3"),
    ("```text\nroll x 75, move x -14\n```", "roll x 75, move x -14"),
    ("roll x 75;move x -14", "roll x 75, move x -14"),
    ("First I thought move x 2.\nFinal answer: move x 3", "move x 3"),
    ("<think>maybe roll y 30</think>roll y 45", "roll y 45"),
])
def test_extract_commands(text, expected):
    assert format_commands(extract_commands(text)) == expected


@pytest.mark.parametrize("text", ["", "no idea", "x 3", "move 3", None])
def test_extract_commands_none(text):
    assert extract_commands(text) is None


def test_net_motion_rules():
    assert single_axis(parse_commands("move x 1, move x 2"), "move").value == 3
    assert single_axis(parse_commands("move x 3, move y 0"), "move").axis == "x"
    assert single_axis(parse_commands("move x 0"), "move").axis == "x"  # the only named axis
    assert single_axis(parse_commands("move x 3, move y 1"), "move") is None
    assert single_axis(parse_commands("roll y 200"), "roll").value == pytest.approx(-160)
    assert single_axis(parse_commands("move x 3, roll y 5"), "move") is None
    d = docking_parts(parse_commands("move x -7, roll x 75, move x -7"))
    assert d.roll.axis == "x" and d.roll.value == 75 and d.move == (-14, 0, 0)


def test_same_motion_knows_what_commutes():
    assert same_motion(parse_commands("move x 3, move y 5"), parse_commands("move y 5, move x 3"))
    assert not same_motion(parse_commands("roll x 90, roll y 90"), parse_commands("roll y 90, roll x 90"))
    assert same_motion(parse_commands("roll z 360"), [])


B = BondItem


@pytest.mark.parametrize("text,verdict,bonds", [
    ("No", "no", ()),
    ("no.", "no", ()),
    ("None", "no", ()),
    ("**No**", "no", ()),
    ("There are no hydrogen bonds between this residue and the ligand.", "no", ()),
    ("Yes", "yes", ()),
    ("Yes: ARG NH2, O1B; ARG NE, O2G", "yes", (B("ARG", "NH2", "O1B"), B("ARG", "NE", "O2G"))),
    ("yes:arg nh2,o1b;arg ne,o2g", "yes", (B("ARG", "NH2", "O1B"), B("ARG", "NE", "O2G"))),
    ("Yes:  ARG   NH2 ,  O1B ;ARG NE,O2G ;", "yes", (B("ARG", "NH2", "O1B"), B("ARG", "NE", "O2G"))),
    ("Answer: Yes - ARG NH2, O1B", "yes", (B("ARG", "NH2", "O1B"),)),
    ("Yes: ARG NH2, O1B; ARG NH2, O1B", "yes", (B("ARG", "NH2", "O1B"),)),  # repeated once
    ("Yes: O1B, ARG NH2", "yes", (B("ARG", "NH2", "O1B"),)),  # ligand atom first
    ("ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A", "yes",
     (B("ARG", "NH2", "O1B", "45", "A"), B("LYS", "NZ", "O1A", "47", "A"))),
    ("- ARG45 NH2 (chain A) - O1B\n- LYS 47 NZ A -> O1A", "yes",
     (B("ARG", "NH2", "O1B", "45", "A"), B("LYS", "NZ", "O1A", "47", "A"))),
    ("1. ARG 45 NH2 A, O1B\n2. LYS 47 NZ A, O1A.", "yes",
     (B("ARG", "NH2", "O1B", "45", "A"), B("LYS", "NZ", "O1A", "47", "A"))),
    ("A ASN 14 ND2, O4'", "yes", (B("ASN", "ND2", "O4'", "14", "A"),)),  # chain first, primed atom
    ("ASN 433 ND2 AAA, O51", "yes", (B("ASN", "ND2", "O51", "433", "AAA"),)),  # four-letter chain ids exist
    ("HIS 57A NE2 B, N3", "yes", (B("HIS", "NE2", "N3", "57A", "B"),)),  # insertion code
    ("The bonds are:\nARG 45 NH2 A, O1B\nThat is all.", "yes", (B("ARG", "NH2", "O1B", "45", "A"),)),
    ("I cannot tell.", None, ()),
    ("", None, ()),
])
def test_interactions(text, verdict, bonds):
    assert parse_interactions(text) == InteractionAnswer(verdict, bonds)


def test_bond_items_round_trip_real_names():
    # Names from committed structures: primes (FMN O4'), chain B, a four-letter chain id.
    bonds = [b for pdb in ("1aku", "1hpx", "7oeo") for b, _, _ in polar_contacts(pdb)]
    assert len(bonds) > 20
    assert any("'" in b.ligand_atom for b in bonds) and any(b.chain == "AAA" for b in bonds)
    for b in bonds:
        assert parse_bond(b.pocket_form()) == b
        assert parse_bond(b.residue_form()) == B(b.residue_name, b.residue_atom, b.ligand_atom)
    text = format_pocket_answer(bonds)
    assert parse_interactions(text).bonds == tuple(dict.fromkeys(bonds))
    assert format_residue_answer([]) == "No" and format_pocket_answer([]) == "None"
    assert format_residue_answer(bonds[:2]).startswith("Yes: ")


def test_answer_region_prefers_tags_then_markers_then_fences():
    assert answer_region("blah <answer> B </answer>")[0] == "B"
    assert answer_region("Reasoning...\nAnswer: roll x 15")[0] == "roll x 15"
    assert answer_region("try ```move x 1``` then ```move x 2```")[0] == "move x 2"
    assert answer_region("plain")[0] == "plain" and answer_region("plain")[1] is False


def test_commands_are_camera_commands():
    cmds = extract_commands("Answer: roll x 75, move x -14")
    assert cmds == [Command("roll", "x", 75.0), Command("move", "x", -14.0)]
