"""eval/image_hbonds.py's account of where a pocket–ligand item's gold bonds went (lost_bonds), on a real item.

The rebuilt complex is stood in for by the true one in the item's camera frame, then damaged one way at a time,
so each cause is known before the function is asked."""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from misi_agent.bench.question import read_questions
from misi_agent.structure import load_complex

from agent_support import generate

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "eval"))


@pytest.fixture(scope="module")
def item(tmp_path_factory):
    """A T9 item of a fixture entry with three or more gold bonds, and its true complex put in the front view's
    camera frame (the frame the image-only tools rebuild in), from the item's atoms.npz."""
    out = tmp_path_factory.mktemp("t9")
    qpath = generate(out / "set", "pocket_ligand_interaction", 6, seed=0, size=256)
    qs = [q for q in read_questions(qpath) if len(q.meta["params"]["bonds"]) >= 3]
    assert qs, "no fixture T9 item with three or more bonds"
    q = qs[0]
    cx = load_complex(q.meta["source"], ligand=q.meta.get("ligand") or None)
    with np.load(qpath.parent / "items" / q.id / q.meta["atoms"]) as z:
        xyz = z["front/coords"]
        names = z["front/atom_name"].astype(str)
    n = cx.pocket.array_length()
    assert list(names) == list(cx.pocket.atom_name) + list(cx.ligand.atom_name)  # pocket first, then ligand
    pocket, ligand = cx.pocket.copy(), cx.ligand.copy()
    pocket.coord, ligand.coord = xyz[:n].astype(np.float32), xyz[n:].astype(np.float32)
    return q, qpath.parent, replace(cx, pocket=pocket, ligand=ligand)


def _gold_text(q) -> str:
    return "; ".join(f"{b['residue_name']} {b['residue_number']}{b['insertion_code']} {b['protein_atom']}, "
                     f"{b['ligand_atom']}" for b in q.meta["params"]["bonds"])


def test_each_cause_is_told_apart_on_a_real_item(item):
    import image_hbonds

    q, set_dir, cx = item
    gold = q.meta["params"]["bonds"]
    n = len(gold)
    causes = image_hbonds.lost_bonds(q, set_dir, cx, _gold_text(q))
    assert causes["found"] == n and sum(causes.values()) == n
    # nothing answered, every atom rebuilt and named: the criteria did not pass them (the complex 3 % too large in
    # Å, as an estimated camera distance leaves it, changes nothing)
    big = replace(cx, pocket=cx.pocket.copy(), ligand=cx.ligand.copy())
    big.pocket.coord *= 1.03
    big.ligand.coord *= 1.03
    causes = image_hbonds.lost_bonds(q, set_dir, big, "")
    assert causes["both right, criteria not passed"] == n, causes
    b = gold[0]
    res = (cx.pocket.res_id == b["residue_number"]) & (cx.pocket.res_name == b["residue_name"]) & (
        cx.pocket.chain_id == b["chain"])
    atom = res & (cx.pocket.atom_name == b["protein_atom"])
    lig = cx.ligand.atom_name == b["ligand_atom"]
    # the first bond's residue under another number, its atom under another name, the ligand atom renamed, gone
    renumbered = replace(cx, pocket=cx.pocket.copy())
    renumbered.pocket.res_id[res] = 9999
    renamed = replace(cx, pocket=cx.pocket.copy())
    renamed.pocket.atom_name[atom] = "XX"
    lig_renamed = replace(cx, ligand=cx.ligand.copy())
    lig_renamed.ligand.atom_name[lig] = "Q9"
    lig_moved = replace(cx, ligand=cx.ligand.copy())
    lig_moved.ligand.coord[lig] += 40.0
    moved = replace(cx, pocket=cx.pocket.copy())
    moved.pocket.coord[res] += 40.0
    for damaged, cause in ((renumbered, "residue misnamed"), (renamed, "residue atom misnamed"),
                           (lig_renamed, "ligand atom misnamed"), (lig_moved, "no ligand atom there"),
                           (moved, "no residue atom there")):
        causes = image_hbonds.lost_bonds(q, set_dir, damaged, "")
        assert causes[cause] >= 1, (cause, causes)
        assert causes[cause] + causes["both right, criteria not passed"] == n, (cause, causes)


def test_answered_bonds_are_read_with_or_without_a_chain():
    import image_hbonds

    got = image_hbonds._answer_bonds("ARG 45 NH2 A, O1B; LYS 47A NZ, O1A; nonsense; ")
    assert got == {("ARG", 45, "", "NH2", "O1B"), ("LYS", 47, "A", "NZ", "O1A")}
    assert image_hbonds._answer_bonds(None) == set()
