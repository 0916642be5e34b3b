"""``misi-agent bench generate``: pools and splits, the plan, reproducibility, shards, resume,
clean errors, and the items it writes (on the committed fixture structures)."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from misi_agent.bench import tasks as T
from misi_agent.bench.generate import GenerateError, generate, parse_shard, parse_tasks, plan, shard_of
from misi_agent.bench.items import place_options, sample_rotation, sample_translation, sample_zoom
from misi_agent.bench.question import read_question, read_questions
from misi_agent.bench.splits import PoolError, discover, hash_split, select
from misi_agent.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"
SMALL = (T.TRANSLATION, T.DOCKING, T.POCKET_LIGAND)


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> Path:
    """Two items of every task from every fixture complex."""
    out = tmp_path_factory.mktemp("gen") / "full"
    s = generate(FIXTURES, out, per_task=2, split="all", seed=7, progress=False)
    assert s.made == 18 and s.merged == 18
    return out


# ----------------------------------------------------------------------------- pools and splits


def test_discover_fixture_pools_and_splits():
    entries = discover(FIXTURES)
    by_pool = Counter(e.pool for e in entries)
    assert by_pool == {"posebusters": 12, "plip": 3}
    for e in entries:
        if e.pool == "plip":
            assert e.split == "heldout" and e.ligand_code is None
        else:
            assert e.split in ("train", "test") and e.ligand_code and e.split == hash_split(e.pdb_id)
    assert {e.pdb_id for e in select(entries, "heldout")} == {"1aku", "1hpx", "3ems"}
    assert len(select(entries, "all")) == 15


def test_hash_split_is_stable_and_about_80_20():
    ids = [f"{n}{a}{b}{c}" for n in range(1, 10) for a in "abcd" for b in "xyz0" for c in "pq"]
    splits = [hash_split(i) for i in ids]
    assert splits == [hash_split(i.upper()) for i in ids]  # case does not matter
    share = splits.count("train") / len(splits)
    assert 0.72 < share < 0.88


def test_heldout_ids_never_reach_train(tmp_path):
    d = tmp_path / "pool"
    d.mkdir()
    shutil.copy(FIXTURES / "7w06.cif.gz", d)
    shutil.copy(FIXTURES / "1aku.pdb.gz", d)
    (d / "manifest.csv").write_text("pdb_id,ligand_ccd,file,pool\n7w06,ITN,7w06.cif.gz,posebusters\n"
                                    "7w06,ITN,7w06.cif.gz,plip\n1aku,,1aku.pdb.gz,\n")
    entries = discover(d)
    assert [(e.pdb_id, e.pool, e.split) for e in entries] == [("1aku", "plip", "heldout"), ("7w06", "plip", "heldout")]


def test_discover_plain_files_and_nested_dirs(tmp_path):
    plip = tmp_path / "root" / "plip"
    plip.mkdir(parents=True)
    shutil.copy(FIXTURES / "3ems.pdb.gz", plip)
    (plip / "notes.txt").write_text("not a structure")
    entries = discover(tmp_path / "root")
    assert [(e.pdb_id, e.pool, e.split, e.ligand_code) for e in entries] == [("3ems", "plip", "heldout", None)]


@pytest.mark.parametrize("manifest, message", [
    ("pdb_id,ligand_ccd\n7w06,ITN\n", "missing column"),
    ("pdb_id,ligand_ccd,file\n7w06,ITN,nope.cif.gz\n", "does not exist"),
    ("pdb_id,ligand_ccd,file,pool\n7w06,ITN,7w06.cif.gz,chembl\n", "unknown pool"),
])
def test_bad_manifests_are_one_line_errors(tmp_path, manifest, message):
    shutil.copy(FIXTURES / "7w06.cif.gz", tmp_path)
    (tmp_path / "manifest.csv").write_text(manifest)
    with pytest.raises(PoolError, match=message):
        discover(tmp_path)


# ----------------------------------------------------------------------------- sampling rules


def test_sampled_values_cover_the_bins_and_never_zero():
    rng = np.random.default_rng(0)
    moves = [sample_translation(rng) for _ in range(600)]
    rolls = [sample_rotation(rng) for _ in range(600)]
    zooms = [sample_zoom(rng) for _ in range(600)]
    assert {m.value for m in moves} == {float(v) for v in (-4, -3, -2, -1, 1, 2, 3, 4)}
    assert {m.axis for m in moves} == {"x", "y"}
    assert {r.value for r in rolls} == {float(v) for v in range(-90, 91, 15) if v}
    assert {r.axis for r in rolls} == {"x", "y", "z"}
    assert {z.value for z in zooms} == {float(v) for v in range(40, 61)} and {z.axis for z in zooms} == {"z"}


def test_correct_letter_is_spread_over_a_to_d():
    letters = Counter(place_options("t", ["a", "b", "c"], np.random.default_rng([3, i]))[1] for i in range(800))
    assert set(letters) == set("ABCD")
    assert all(150 < n < 250 for n in letters.values())


# ----------------------------------------------------------------------------- plan and arguments


def test_plan_and_shards_partition_the_items():
    items = plan(T.TASK_IDS, 5)
    assert len(items) == 45
    shards = [shard_of(items, (i, 4)) for i in range(1, 5)]
    assert sorted((it.task, it.index) for s in shards for it in s) == sorted((it.task, it.index) for it in items)
    assert parse_shard("2/4") == (2, 4) and parse_shard(None) == (1, 1)
    assert parse_tasks("all") == T.TASK_IDS
    assert parse_tasks("docking, translation") == (T.TRANSLATION, T.DOCKING)


@pytest.mark.parametrize("args, message", [
    (["--tasks", "translation,flying"], "unknown task"),
    (["--tasks", "translation,translation"], "twice"),
    (["--shard", "3/2"], "shard"),
    (["--shard", "0/2"], "shard"),
    (["--shard", "one/two"], "shard"),
    (["--per-task", "0"], "--per-task"),
    (["--per-task", "many"], "--per-task"),
    (["--split", "validation"], "unknown split"),
    (["--renderer", "povray"], "unknown renderer"),
    (["--size", "10"], "--size"),
    (["--seed", "-1"], "--seed"),
])
def test_bad_arguments_exit_2_with_one_line_and_no_output(tmp_path, capsys, args, message):
    out = tmp_path / "out"
    rc = main(["bench", "generate", "--structures", str(FIXTURES), "--out", str(out), "--no-progress"] + args)
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_bad_structures_dir_is_a_clean_error(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    for d in (tmp_path / "missing", empty):
        rc = main(["bench", "generate", "--structures", str(d), "--out", str(tmp_path / "out"), "--no-progress"])
        err = capsys.readouterr().err
        assert rc == 2 and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_split_without_entries_is_an_error(tmp_path):
    d = tmp_path / "pool"
    d.mkdir()
    shutil.copy(FIXTURES / "3ems.pdb.gz", d)  # plain file: PLIP pool, heldout only
    with pytest.raises(GenerateError, match="no entry in split 'test'"):
        generate(d, tmp_path / "out", tasks=(T.TRANSLATION,), per_task=1, split="test", progress=False)
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- the items written


def test_every_task_is_written_and_valid(full):
    qs = read_questions(full / "questions.jsonl", validate=True, check_images=True)
    assert Counter(q.task for q in qs) == {t: 2 for t in T.TASK_IDS}
    assert [q.task for q in qs] == [t for t in T.TASK_IDS for _ in range(2)]  # plan order
    for q in qs:
        assert q.meta["split"] in ("train", "test", "heldout") and q.meta["renderer"] == "raster"
        assert q.meta["pdb_id"] in q.id and q.meta["ligand"] and "params" in q.meta
        single = read_question(full / "items" / q.id / "question.json", validate=True, check_images=True)
        assert single.answer == q.answer and single.question == q.question
        assert [f"items/{q.id}/{p}" for p in single.images] == q.images
        assert q.meta["pdb_id"].upper() in q.question
        with np.load(full / "items" / q.id / "atoms.npz") as z:
            assert {f"{n}/screen" for n in q.meta["image_names"]} <= set(z.files)
        if q.info.format == T.MC:
            assert q.answer in T.CHOICE_LETTERS
        if q.info.format == T.CLOZE and q.answer != "No":
            assert q.answer not in q.question  # no answer leaks into the prompt


def test_text_options_only_for_interaction_location(full):
    for q in read_questions(full / "questions.jsonl"):
        if q.task == T.INTERACTION_LOCATION:
            assert len(q.options) == 4 and all(o in q.question for o in q.options)
        else:
            assert q.options is None


def test_same_seed_same_bytes_other_seed_other_items(full, tmp_path):
    again = tmp_path / "again"
    generate(FIXTURES, again, per_task=2, split="all", seed=7, progress=False)
    assert (again / "questions.jsonl").read_text() == (full / "questions.jsonl").read_text()
    for q in read_questions(full / "questions.jsonl")[::5]:
        for p in q.images:
            assert (again / p).read_bytes() == (full / p).read_bytes()
    other = tmp_path / "other"
    generate(FIXTURES, other, tasks=(T.TRANSLATION, T.ROTATION), per_task=2, split="all", seed=8, progress=False)
    a = {q.id: q.answer for q in read_questions(full / "questions.jsonl") if q.task in (T.TRANSLATION, T.ROTATION)}
    b = {q.id: q.answer for q in read_questions(other / "questions.jsonl")}
    assert a != b


def test_shards_merge_into_the_unsharded_result(full, tmp_path):
    out = tmp_path / "sharded"
    s1 = generate(FIXTURES, out, per_task=2, split="all", seed=7, shard=(1, 2), progress=False)
    assert s1.merged is None and not (out / "questions.jsonl").exists()
    s2 = generate(FIXTURES, out, per_task=2, split="all", seed=7, shard=(2, 2), progress=False)
    assert s1.made + s2.made == 18 and s2.merged == 18
    assert (out / "questions.jsonl").read_text() == (full / "questions.jsonl").read_text()


def test_resume_after_interruption(tmp_path):
    out = tmp_path / "resume"
    kw = dict(tasks=SMALL, per_task=2, split="all", seed=3, progress=False)
    generate(FIXTURES, out, **kw)
    reference = (out / "questions.jsonl").read_text()
    shard = out / "shards" / "questions.shard-1-of-1.jsonl"
    lines = shard.read_text().splitlines()
    # interrupted: the last item's line was cut short, and one item folder is gone
    shard.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    gone = json.loads(lines[0])["id"]
    shutil.rmtree(out / "items" / gone)
    (out / "questions.jsonl").unlink()
    s = generate(FIXTURES, out, **kw)
    assert s.made == 2 and s.skipped == 4
    assert (out / "questions.jsonl").read_text() == reference
    s = generate(FIXTURES, out, **kw)
    assert s.made == 0 and s.merged == 6


def test_other_generation_in_the_same_out_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    generate(FIXTURES, out, tasks=(T.TRANSLATION,), per_task=1, split="all", seed=1, progress=False)
    before = sorted(p.name for p in (out / "items").iterdir())
    rc = main(["bench", "generate", "--structures", str(FIXTURES), "--out", str(out), "--tasks", "translation",
               "--per-task", "1", "--split", "all", "--seed", "2", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "seed" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in (out / "items").iterdir()) == before


def test_heldout_split_uses_only_the_plip_pool(tmp_path):
    out = tmp_path / "heldout"
    generate(FIXTURES, out, tasks=(T.ROTATION, T.POCKET_LIGAND), per_task=2, split="heldout", seed=0, progress=False)
    for q in read_questions(out / "questions.jsonl"):
        assert q.meta["split"] == "heldout" and q.meta["pool"] == "plip"
        assert q.meta["pdb_id"] in {"1aku", "1hpx", "3ems"}


def test_items_of_a_task_use_distinct_complexes_while_the_pool_lasts(tmp_path):
    out = tmp_path / "distinct"
    generate(FIXTURES, out, tasks=(T.POCKET_LIGAND, T.ZOOMING), per_task=5, split="all", seed=0, progress=False)
    qs = read_questions(out / "questions.jsonl")
    for task in (T.POCKET_LIGAND, T.ZOOMING):
        ids = [q.meta["pdb_id"] for q in qs if q.task == task]
        assert len(set(ids)) == len(ids) == 5


def test_cli_generate_prints_a_summary(tmp_path, capsys):
    out = tmp_path / "cli"
    rc = main(["bench", "generate", "--structures", str(FIXTURES), "--out", str(out), "--tasks", "zooming",
               "--per-task", "1", "--split", "train", "--no-progress"])
    assert rc == 0
    assert "1 item(s) made" in capsys.readouterr().out
    (q,) = read_questions(out / "questions.jsonl", check_images=True)
    assert q.meta["split"] == "train"
    assert json.loads((out / "generation.json").read_text())["split"] == "train"
