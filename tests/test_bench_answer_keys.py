"""Answer keys are derived from the scenes: the independent check (eval/check_answer_keys.py)
passes on every generated item and fails on tampered ones; the task generators' own
invariants hold on the fixture structures."""
from __future__ import annotations

import importlib.util
import json
import math
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from misi_agent.bench import tasks as T
from misi_agent.bench import task_geometry as G
from misi_agent.bench import task_hbonds as H
from misi_agent.bench.answers import parse_bond_list
from misi_agent.bench.generate import generate
from misi_agent.bench.items import DECOY_SCHEMES, all_distinct, decoy_pairs, mean_pixel_difference
from misi_agent.camera import Camera, Command, apply_commands, parse_commands
from misi_agent.structure import load_complex
from misi_agent.tools.hbonds import find_hbonds

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "misi_agent" / "data" / "structures"
_spec = importlib.util.spec_from_file_location("check_answer_keys", ROOT / "eval" / "check_answer_keys.py")
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


@pytest.fixture(scope="module")
def items(tmp_path_factory) -> dict[str, list[Path]]:
    """Three items of every task (the T4 ones: positive, negative, positive)."""
    out = tmp_path_factory.mktemp("keys") / "out"
    generate(FIXTURES, out, per_task=3, split="all", seed=11, progress=False)
    by_task: dict[str, list[Path]] = {}
    for p in sorted(out.glob("items/*/question.json")):
        by_task.setdefault(json.loads(p.read_text())["task"], []).append(p)
    return by_task


@pytest.fixture(scope="module")
def cx():
    return load_complex(FIXTURES / "7x9k.cif.gz", "8OG")


def _tampered(src: Path, tmp_path: Path, edit) -> Path:
    dst = tmp_path / src.parent.name
    shutil.copytree(src.parent, dst)
    q = json.loads((dst / "question.json").read_text())
    edit(q)
    (dst / "question.json").write_text(json.dumps(q))
    return dst / "question.json"


# ----------------------------------------------------------------------------- the independent check


def test_every_generated_answer_key_verifies(items):
    assert set(items) == set(T.TASK_IDS)
    for task, paths in items.items():
        for p in paths:
            assert check.check_item(p) == [], (task, p.parent.name)


def test_cli_check_reports_all_verified(items, capsys):
    out = next(iter(items.values()))[0].parents[2]
    assert check.main([str(out)]) == 0
    assert "total 27 / 27 verified" in capsys.readouterr().out


@pytest.mark.parametrize("task", [T.TRANSLATION, T.ROTATION, T.ZOOMING])
def test_check_rejects_a_wrong_unit_answer(items, tmp_path, task):
    def edit(q):
        (c,) = parse_commands(q["answer"])
        step = 15 if c.op == "roll" else 1
        q["answer"] = f"{c.op} {c.axis} {int(c.value) + (step if c.value < 0 or task == T.ZOOMING and c.value < 60 else -step)}"

    assert check.check_item(_tampered(items[task][0], tmp_path, edit))


def test_check_rejects_a_wrong_docking_answer(items, tmp_path):
    def flip_move(q):
        roll, move = parse_commands(q["answer"])
        q["answer"] = f"{roll}, move x {int(-move.value)}"

    def flip_roll(q):
        roll, move = parse_commands(q["answer"])
        q["answer"] = f"roll {roll.axis} {int(-roll.value)}, {move}"

    for edit in (flip_move, flip_roll):
        problems = check.check_item(_tampered(items[T.DOCKING][0], tmp_path / edit.__name__, edit))
        assert any("misses the docked ligand" in p for p in problems)


@pytest.mark.parametrize("task", [T.TRANSLATION_ROTATION, T.ROTATION_ROTATION, T.INTERACTION_LOCATION])
def test_check_rejects_a_wrong_letter(items, tmp_path, task):
    def edit(q):
        q["answer"] = "ABCD"[("ABCD".index(q["answer"]) + 1) % 4]

    assert check.check_item(_tampered(items[task][0], tmp_path, edit))


def test_check_rejects_wrong_interaction_lists(items, tmp_path):
    pos = next(p for p in items[T.RESIDUE_LIGAND] if json.loads(p.read_text())["answer"].startswith("Yes"))
    neg = next(p for p in items[T.RESIDUE_LIGAND] if json.loads(p.read_text())["answer"] == "No")
    assert check.check_item(_tampered(pos, tmp_path / "a", lambda q: q.update(answer="No")))
    assert check.check_item(_tampered(neg, tmp_path / "b", lambda q: q.update(answer="Yes: ARG NH2, O1")))

    def drop_last(q):
        q["answer"] = "; ".join(q["answer"].split("; ")[:-1]) or "ARG 1 NE A, O1"

    assert check.check_item(_tampered(items[T.POCKET_LIGAND][0], tmp_path / "c", drop_last))


def test_check_rejects_an_after_image_that_moved(items, tmp_path):
    src = items[T.TRANSLATION][0]
    dst = tmp_path / "moved"
    shutil.copytree(src.parent, dst)
    with np.load(dst / "atoms.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["after/screen"] = arrays["after/screen"] + np.array([2.0, 0.0])
    np.savez_compressed(dst / "atoms.npz", **arrays)
    assert any("after image" in p for p in check.check_item(dst / "question.json"))


# ----------------------------------------------------------------------------- generator invariants


def test_unit_after_images_follow_the_answer(cx):
    for seed in range(6):
        for gen in (G.translation, G.rotation, G.zooming):
            item = gen(cx, np.random.default_rng(seed))
            front, after = item.images[0].scene, item.images[3].scene
            np.testing.assert_allclose(apply_commands(front.coords, item.answer), after.coords, atol=1e-9)
            assert [i.name for i in item.images] == ["front", "left", "top", "after"]


def test_zoom_keeps_the_centroid_in_front_of_the_camera(cx):
    for seed in range(10):
        item = G.zooming(cx, np.random.default_rng(seed))
        (c,) = parse_commands(item.answer)
        assert 40 <= c.value <= item.params["max_zoom"] <= 60
        assert -item.images[3].scene.centroid[2] >= G.MIN_ZOOM_DEPTH


def test_multistep_decoys_follow_the_three_schemes():
    rng = np.random.default_rng(5)
    for _ in range(50):
        f1, f2 = Command("move", "x", 3.0), Command("roll", "y", -45.0)
        (m1, m2), (s1, s2), (a1, a2) = decoy_pairs(f1, f2, rng)
        assert m1.axis == "x" and m1.value > 0 and m1.value != 3 and m2.value < 0 and m2.value != -45
        assert s1 == Command("move", "x", -3.0) and s2.axis == "y" and s2.value not in (-45.0,) and s2.value < 0
        assert a1.axis == "y" and a1.value == 3 and a2.value != -45
    assert DECOY_SCHEMES == ("magnitude_both", "flip_f1_magnitude_f2", "axis_f1_magnitude_f2")


def test_multiple_choice_options_are_visibly_different(cx):
    other = load_complex(FIXTURES / "7w06.cif.gz", "ITN")
    for seed in range(3):
        for item in (G.translation_rotation(cx, other, np.random.default_rng(seed)),
                     G.rotation_rotation(cx, np.random.default_rng(seed))):
            opts = [img.scene.coords for img in item.images if img.name.startswith("option_")]
            assert len(opts) == 4 and all_distinct(opts)
            truth = item.images[-4 + "ABCD".index(item.answer)]
            base = item.images[4].scene if item.task == T.TRANSLATION_ROTATION else item.images[3].scene
            np.testing.assert_allclose(apply_commands(base.coords, item.params["commands"]), truth.scene.coords,
                                       atol=1e-9)
            schemes = sorted(v["scheme"] for v in item.params["options"].values())
            assert schemes == sorted(("truth",) + DECOY_SCHEMES)


def test_rotation_rotation_uses_two_different_axes(cx):
    for seed in range(10):
        r1, r2 = parse_commands(G.rotation_rotation(cx, np.random.default_rng(seed)).params["commands"])
        assert r1.op == r2.op == "roll" and r1.axis != r2.axis


def test_docking_answer_puts_the_ligand_back(cx):
    cam = Camera(512, 512)
    for seed in range(5):
        item = G.docking(cx, np.random.default_rng(seed))
        both = item.images[-1].scene
        roll, move = parse_commands(item.answer)
        assert roll.op == "roll" and move.op == "move" and move.axis == "x"
        assert T.DOCKING_SHIFT_GRID.contains(move.value) and T.DOCKING_ROLL_GRID.contains(roll.value)
        np.testing.assert_allclose(both.apply(item.answer, which="ligand").coords, item.references["docked"].coords,
                                   atol=1e-9)
        # the displaced ligand is drawn clear of the pocket in the front view
        screen, _ = cam.project(both.coords)
        gap = np.linalg.norm(screen[both.is_ligand][:, None] - screen[~both.is_ligand][None], axis=2).min()
        assert gap > G.DOCK_CLEARANCE_PX
        # the parts alone look along the same directions as image 7, each framed by itself
        pocket, ligand = item.images[0].scene, item.images[3].scene
        for part, mask in ((pocket, ~both.is_ligand), (ligand, both.is_ligand)):
            shift = part.coords - both.coords[mask]
            np.testing.assert_allclose(shift, np.broadcast_to(shift[0], shift.shape), atol=1e-9)
            np.testing.assert_allclose(part.centroid[:2], [0, 0], atol=1e-9)


def test_residue_ligand_answers_equal_the_engine(cx):
    engine = find_hbonds(cx, mode="relaxed")
    for seed in range(4):
        pos = H.residue_ligand(cx, np.random.default_rng(seed), positive=True)
        r = pos.params["residue"]
        truth = {(h.residue_name, h.protein_atom, h.ligand_atom) for h in engine
                 if (h.chain, h.residue_number, h.residue_name) == (r["chain"], r["number"], r["name"])}
        got = {(b.residue_name, b.residue_atom, b.ligand_atom) for b in parse_bond_list(pos.answer[5:], strict=True)}
        assert pos.answer.startswith("Yes: ") and got == truth and truth
        neg = H.residue_ligand(cx, np.random.default_rng(seed), positive=False)
        r = neg.params["residue"]
        assert neg.answer == "No" and neg.params["negative_pool"] == "contact"
        assert not any((h.chain, h.residue_number) == (r["chain"], r["number"]) for h in engine)
        for img in neg.images:
            shown = {img.scene.residue_keys[i] for i in set(img.scene.residue.tolist()) - {-1}}
            assert [(k.chain, k.number) for k in shown] == [(r["chain"], r["number"])]
        assert len(neg.images) == 6


def test_pocket_ligand_answer_is_every_engine_bond_once(cx):
    item = H.pocket_ligand(cx, np.random.default_rng(0))
    truth = {(h.chain, str(h.residue_number), h.residue_name, h.protein_atom, h.ligand_atom)
             for h in find_hbonds(cx, mode="relaxed")}
    bonds = parse_bond_list(item.answer, strict=True)
    assert len(bonds) == len(truth)
    assert {(b.chain, b.residue_number, b.residue_name, b.residue_atom, b.ligand_atom) for b in bonds} == truth


def test_interaction_location_answer_centres_the_bond(cx):
    for seed in range(6):
        item = H.interaction_location(cx, np.random.default_rng(seed))
        front = item.images[0].scene
        b = item.params["bond"]
        pi = b["protein_index"]
        li = cx.pocket.array_length() + b["ligand_index"]
        assert (front.atom_names[pi], front.atom_names[li]) == (b["protein_atom"], b["ligand_atom"])
        truth = item.options[item.answer]
        moved = apply_commands(front.coords, truth)
        c = (moved[pi] + moved[li]) / 2
        assert abs(c[0]) <= 0.5 and abs(c[1]) <= 0.5  # rounding to whole Å is the only error
        exact = apply_commands(front.coords, [Command("move", "x", -(front.coords[pi, 0] + front.coords[li, 0]) / 2),
                                              Command("move", "y", -(front.coords[pi, 1] + front.coords[li, 1]) / 2)])
        ce = (exact[pi] + exact[li]) / 2
        u, _ = Camera(512, 512).project(ce[None])
        np.testing.assert_allclose(u[0], [256, 256], atol=1e-6)  # on the line of sight whatever the depth
        texts = list(item.options.values())
        assert len(set(texts)) == 4
        states = [apply_commands(front.coords, t) for t in texts]
        assert min(mean_pixel_difference(a, b) for i, a in enumerate(states) for b in states[i + 1:]) >= 8
        vals = [tuple(c.value for c in parse_commands(t)) for t in texts]
        assert all(max(abs(a[0] - b[0]), abs(a[1] - b[1])) >= 2 for i, a in enumerate(vals) for b in vals[i + 1:])
        # a 2 x 2 grid: every x value and every y value appears in exactly two options
        assert sorted(Counter(v[0] for v in vals).values()) == [2, 2]
        assert sorted(Counter(v[1] for v in vals).values()) == [2, 2]
        assert not math.isnan(c[2])
