"""The ablation runner (eval/ablation.py) end to end on a few generated items, and the H-bond
knowledge variants it configures the router with.

Arms run: the pure VLM and the VLM planner (tiny Qwen2.5-VL models with random weights:
the path, not the words), the router, the oracle arm, the distance-only knowledge arm and
the images-only grounding arm (the router with --grounding images).
Then: scores beside the paper's rows, the plot, tool-call validity and turns, resume after
a crash, and cache hits on a second run.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from agent_support import FIXTURES, generate, save_tiny_qwen
from misi_agent.agent.context import AgentContext
from misi_agent.agent.knowledge_variants import DISTANCE_CUTOFF, build_variant_registry, distance_hbonds
from misi_agent.agent.store import StructureStore
from misi_agent.agent.toolset import build_registry
from misi_agent.bench.question import read_questions
from misi_agent.bench.answers import parse_prediction
from misi_agent.bench.scoring import score_item
from misi_agent.agent.loop import answer_question
from misi_agent.agent.planners.router import RouterPlanner
from misi_agent.structure import ligand_candidates, load_complex, read_atoms

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "eval"))
import ablation as A  # noqa: E402
from distill_traces import CallCache  # noqa: E402

TASKS = "residue_ligand_interaction,pocket_ligand_interaction"
PIN = "test-code"  # the tool-code fingerprint of the cache keys, pinned: others may edit the tree meanwhile


@pytest.fixture(scope="module")
def qset(tmp_path_factory):
    # one item per task: every arm answers both H-bond tasks (the images-only arm only the residue–ligand one)
    return generate(tmp_path_factory.mktemp("abl") / "set", TASKS, 1)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return save_tiny_qwen(root / "sft"), save_tiny_qwen(root / "planner")


def _config(tmp: Path, qset: Path, models, arms: list[dict]) -> A.AblationConfig:
    sft, planner = models
    raw = {
        "name": "t", "seed": 0, "results_dir": str(tmp / "results"), "work_dir": str(tmp / "work"),
        "structures": [str(FIXTURES)], "bootstrap": 200,
        "sets": {"fixtures": {"structures": str(FIXTURES), "split": "all", "out": str(qset.parent)}},
        "planner_defaults": {"max_new_tokens": 8, "min_pixels": 28 * 28 * 4, "max_pixels": 28 * 28 * 4},
        "models": {"sft": {"path": str(sft)}, "planner": {"path": str(planner)}},
        "arms": arms,
    }
    return A.AblationConfig.from_dict(raw, source="test")


ARMS = [
    {"name": "pure_vlm", "kind": "vlm", "model": "sft", "tools": False, "max_turns": 1},
    {"name": "vlm_tools", "kind": "vlm", "model": "planner", "tools": True, "max_turns": 2},
    {"name": "router", "kind": "router"},
    {"name": "oracle", "kind": "oracle", "model": "planner", "max_turns": 1},
    {"name": "hbonds_distance", "kind": "router", "hbonds": "distance"},
    # residue–ligand only: a pocket–ligand item from the pictures fits a dozen residues (minutes on a CI machine);
    # that path is tested on its parts in test_image_hbonds.py and measured in eval/results
    {"name": "grounding_images", "kind": "router", "grounding": "images", "tasks": ["residue_ligand_interaction"]},
]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, qset, models):
    tmp = tmp_path_factory.mktemp("run")
    cfg = _config(tmp, qset, models, ARMS)
    report = A.run(cfg, progress=False, config_path="test.yaml", fingerprint=PIN)
    return cfg, report


def _records(cfg, arm: str) -> list[dict]:
    path = cfg.results_dir / "fixtures" / arm / "predictions.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_every_arm_writes_predictions_and_is_scored(first_run, qset):
    cfg, report = first_run
    qs = read_questions(qset)
    arms = report["sets"]["fixtures"]["arms"]
    for name in ("pure_vlm", "vlm_tools", "router", "oracle", "hbonds_distance"):
        recs = _records(cfg, name)
        assert sorted(r["id"] for r in recs) == sorted(q.id for q in qs), name
        assert arms[name]["status"]["status"] == "ok" and arms[name]["scores"]["n_items"] == len(qs)
    # the router arm gives the agent's own answers (misi-agent answer --planner router)
    store = StructureStore([FIXTURES], use_env=False)
    router = {r["id"]: r for r in _records(cfg, "router")}
    for q in qs:
        assert router[q.id]["prediction"] == (answer_question(q, qset.parent, RouterPlanner(), store).answer or None)
        # where the entry holds one ligand, nothing can go wrong: the engine is the benchmark's own rule
        if len(ligand_candidates(read_atoms(q.meta["source"]))) == 1:
            assert score_item(q, router[q.id]["prediction"]).exact
    # the distance-only arm answers with the distance rule on the same complex
    for r in _records(cfg, "hbonds_distance"):
        q = next(q for q in qs if q.id == r["id"])
        ctx = AgentContext(images=q.image_paths(qset.parent), store=store)
        name, args = A.expected_call(q)
        res = build_variant_registry(ctx, "distance").call(name, args)
        assert res.ok and parse_prediction(q, r["prediction"]) == parse_prediction(q, res.output["answer"])
    # tables beside the paper's rows, the plot, the commands
    table = (cfg.results_dir / "fixtures" / "table.md").read_text()
    assert "Human (paper" in table and "Qwen2.5VL-7B-SFT (paper" in table and "Exact match" in table
    assert "| **router** |" in table
    assert (cfg.results_dir / "fixtures" / "scores.png").stat().st_size > 10_000
    assert "python eval/ablation.py --config test.yaml" in (cfg.results_dir / "commands.md").read_text()


def test_images_only_grounding_arm_answers_from_the_pictures(first_run, qset):
    """Arm (f): the router with --grounding images runs on every item of its task (residue–ligand), its tool
    calls complete from the pictures alone, and it is scored in the table like any other arm."""
    cfg, report = first_run
    st = report["sets"]["fixtures"]["arms"]["grounding_images"]["status"]
    assert st["status"] == "ok"
    recs = _records(cfg, "grounding_images")
    mine = {q.id for q in read_questions(qset) if q.task == "residue_ligand_interaction"}
    assert mine and {r["id"] for r in recs} == mine
    assert all(r["tool_calls"] for r in recs)
    assert sum(c["ok"] for r in recs for c in r["tool_calls"]) >= len(recs) / 2
    table = (cfg.results_dir / "fixtures" / "table.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| **grounding_images** |"))
    assert "not available" not in row and any(ch.isdigit() for ch in row)


def test_planner_arms_record_validity_and_turns(first_run, qset):
    cfg, report = first_run
    qs = read_questions(qset)
    for name in ("pure_vlm", "vlm_tools", "oracle"):
        p = report["sets"]["fixtures"]["arms"][name]["planner"]
        assert p["items"] == len(qs) and 0 <= p["valid_call_items_pct"] <= 100
        assert p["mean_turns"] >= 1
    for r in _records(cfg, "pure_vlm"):
        assert r["turns"] == 1 and not r["inserted_oracle_call"]
        assert all(not c["valid"] for c in r["tool_calls"])  # no tools exist in this arm
    for r in _records(cfg, "oracle"):
        # the inserted call is not the model's: turns and validity count the model's steps only
        assert r["inserted_oracle_call"] and r["turns"] == 1
    recs = _records(cfg, "vlm_tools")
    n_valid = sum(r["all_calls_valid"] for r in recs)
    assert report["sets"]["fixtures"]["arms"]["vlm_tools"]["planner"]["valid_call_items_pct"] == \
        pytest.approx(100 * n_valid / len(recs), abs=0.01)


def test_validity_classifier_on_real_registry(qset):
    q = read_questions(qset)[0]
    reg = build_registry(AgentContext(images=q.image_paths(qset.parent), store=StructureStore(use_env=False)))
    good = {"name": "pocket_hbonds", "arguments": {"pdb_id": "6YQW"}, "error": None}
    assert A.classify_call(good, reg) is None
    assert A.classify_call({"name": "pocket_hbonds", "arguments": {"pdb": "6YQW"}, "error": None}, reg) == "invalid arguments"
    assert A.classify_call({"name": "fly", "arguments": {}, "error": None}, reg) == "unknown tool"
    assert A.classify_call({"name": "", "arguments": None, "error": "not JSON"}, reg) == "unparseable"


def test_second_run_resumes_and_hits_the_cache(first_run, qset, models, tmp_path):
    cfg, _ = first_run
    # a second run over finished arms answers nothing again
    rep = A.run(cfg, arms=["router", "vlm_tools"], progress=False, fingerprint=PIN)
    assert all(rep["sets"]["fixtures"]["arms"][a]["status"]["answered_now"] == 0 for a in ("router", "vlm_tools"))
    # running some arms again keeps every other arm's scores in the report and the tables
    assert all("scores" in rep["sets"]["fixtures"]["arms"][a["name"]] for a in ARMS)
    table = (cfg.results_dir / "fixtures" / "table.md").read_text()
    assert all(f"| **{a['name']}** |" in table for a in ARMS)
    # the same calls in a fresh results folder come from the cache: no model step, no tool call is recomputed
    cache_before = CallCache(cfg.cache)
    n_entries = cache_before.count()
    cache_before.close()
    fresh = A.AblationConfig.from_dict({**cfg.raw, "results_dir": str(tmp_path / "fresh"), "cache": str(cfg.cache)},
                                       source="test")
    rep = A.run(fresh, arms=["router", "vlm_tools"], progress=False, fingerprint=PIN)
    assert rep["cache"]["misses"] == {} and rep["cache"]["hits"].get("planner", 0) >= len(read_questions(qset))
    assert rep["cache"]["hits"].get("tool", 0) >= len(read_questions(qset))
    assert rep["cache"]["entries"] == n_entries
    recs = [json.loads(x) for x in (tmp_path / "fresh" / "fixtures" / "vlm_tools" / "predictions.jsonl").read_text().splitlines()]
    assert all(r["cached_steps"] == r["turns"] for r in recs)
    assert [r["prediction"] for r in recs] == [r["prediction"] for r in _records(cfg, "vlm_tools")]
    # changed tool code (another fingerprint) misses the tool entries, never the model's
    other = A.AblationConfig.from_dict({**cfg.raw, "results_dir": str(tmp_path / "other"), "cache": str(cfg.cache)},
                                       source="test")
    rep = A.run(other, arms=["router"], progress=False, fingerprint="changed-code")
    assert rep["cache"]["misses"].get("tool", 0) == len(read_questions(qset))


def test_resume_after_an_interrupted_write(first_run, qset, tmp_path):
    cfg, _ = first_run
    src = cfg.results_dir / "fixtures" / "router" / "predictions.jsonl"
    lines = src.read_text().splitlines()
    again = A.AblationConfig.from_dict({**cfg.raw, "results_dir": str(tmp_path / "r"), "cache": str(cfg.cache)},
                                       source="test")
    dst = again.results_dir / "fixtures" / "router" / "predictions.jsonl"
    dst.parent.mkdir(parents=True)
    dst.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])  # a crash in the middle of the second line
    rep = A.run(again, arms=["router"], progress=False, fingerprint=PIN)
    recs = [json.loads(x) for x in dst.read_text().splitlines()]
    assert len(recs) == len(lines) and len({r["id"] for r in recs}) == len(lines)
    assert rep["sets"]["fixtures"]["arms"]["router"]["status"]["answered_now"] == len(lines) - 1
    assert rep["sets"]["fixtures"]["arms"]["router"]["scores"] == first_run[1]["sets"]["fixtures"]["arms"]["router"]["scores"]


def test_distance_rule_and_variant_registry():
    cx = load_complex(FIXTURES / "6yqw.cif.gz", pdb_id="6yqw")
    bonds = distance_hbonds(cx)
    # brute force: every pocket N/O – ligand N/O pair within the cut-off, and nothing else
    p = [i for i, e in enumerate(cx.pocket.element) if e in ("N", "O")]
    l_ = [j for j, e in enumerate(cx.ligand.element) if e in ("N", "O")]
    want = {(i, j) for i in p for j in l_ if np.linalg.norm(cx.pocket.coord[i] - cx.ligand.coord[j]) <= DISTANCE_CUTOFF}
    assert {(b.protein_index, b.ligand_index) for b in bonds} == want and want
    # every engine bond between N/O atoms closer than the cut-off is also a proximity pair
    from misi_agent.agent.chem_tools import engine_hbonds

    for hb in engine_hbonds(cx)[0]:
        if hb.distance <= DISTANCE_CUTOFF and cx.pocket.element[hb.protein_index] in ("N", "O") \
                and cx.ligand.element[hb.ligand_index] in ("N", "O"):
            assert (hb.protein_index, hb.ligand_index) in want
    ctx = AgentContext(images=[], store=StructureStore(use_env=False))
    base, variant = build_registry(ctx), build_variant_registry(ctx, "distance")
    assert base.names() == variant.names()
    for name in ("residue_hbonds", "pocket_hbonds"):
        assert variant.get(name).parameters == base.get(name).parameters
        assert "distance-only" in variant.get(name).description
    res = variant.call("pocket_hbonds", {"pdb_id": "6YQW"})
    assert res.ok and res.output["criterion"] == "distance" and res.output["n_bonds"] == len(
        {(b.chain, b.residue_number, b.protein_atom, b.ligand_atom) for b in bonds})


def test_bad_config_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsets: {s: {structures: ., split: test}}\narms: [{name: a, kind: telepathy}]\n")
    assert A.main(["--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "telepathy" not in err and "kind must be one of" in err
