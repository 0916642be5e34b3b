"""The fine-tuning recipe (eval/finetune.py) on a few generated items: router traces as chat
transcripts, loss masks on the assistant turns only, a few training steps of a small
Qwen2.5-VL built from a config, saving with safetensors and reloading through the
``transformers:PATH`` planner, which then generates. A local checkpoint is fine-tuned in
full on the CPU; LoRA without peft stops with a one-line message.
"""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from agent_support import generate
from misi_agent.agent.loop import build_messages
from misi_agent.agent.planners import make_planner
from misi_agent.agent.planners.base import PlannerInput
from misi_agent.bench.question import read_questions
from misi_agent.bench.scoring import score_item

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "eval"))
import finetune as F  # noqa: E402
from distill_traces import EvalError  # noqa: E402

TINY = {"family": "qwen2_5_vl", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1, "vision_depth": 1, "vision_hidden_size": 32,
        "vision_intermediate_size": 64, "vision_heads": 2, "vocab_size": 2000, "byte_level_regex": False,
        "isolate": "[0-9A-Z]", "image_min_tokens": 4, "image_max_tokens": 4}


def _config(work: Path, qset: Path, **over) -> F.FinetuneConfig:
    raw = {"name": "t", "seed": 0, "work_dir": str(work),
           "structures": [str(REPO / "misi_agent" / "data" / "structures")],
           "train_set": {"structures": str(REPO / "misi_agent" / "data" / "structures"), "split": "all",
                         "out": str(qset.parent)},
           "model": {"base": "tiny", "tiny": TINY, "device": "cpu", "dtype": "float32"},
           "training": {"epochs": 20, "lr": 5e-3, "warmup_steps": 2, "grad_accum": 1, "max_length": 4096,
                        "max_steps": 40},
           "flavours": {"tools": {"out": str(work / "tools")}, "direct": {"out": str(work / "direct")}}}
    for k, v in over.items():
        raw[k] = {**raw.get(k, {}), **v} if isinstance(v, dict) else v
    return F.FinetuneConfig.from_dict(raw, source="test")


@pytest.fixture(scope="module")
def qset(tmp_path_factory):
    return generate(tmp_path_factory.mktemp("train") / "set", "residue_ligand_interaction,pocket_ligand_interaction", 2)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, qset):
    work = tmp_path_factory.mktemp("work")
    cfg = _config(work, qset)
    log = F.finetune(cfg, "tools", progress=False)
    return cfg, log, Path(log["out"])


def test_router_traces_become_tool_call_transcripts(trained, qset):
    cfg, log, _ = trained
    rows = F.read_transcripts(cfg.work_dir / "transcripts-tools.jsonl")
    questions = {q.id: q for q in read_questions(qset)}
    assert len(rows) == len(questions) == 4 and all(r["complete"] for r in rows)
    for r in rows:
        q = questions[r["id"]]
        roles = [m["role"] for m in r["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant"]
        call = r["messages"][2]["tool_calls"][0]["function"]
        args = json.loads(call["arguments"])
        assert call["name"] == {"residue_ligand_interaction": "residue_hbonds",
                                "pocket_ligand_interaction": "pocket_hbonds"}[q.task]
        # every argument value is copied from the question text as written (the PDB ID in capitals)
        assert args["pdb_id"] in q.question and args["pdb_id"] == q.meta["pdb_id"].upper()
        result = json.loads(r["messages"][3]["content"])["result"]
        assert r["messages"][4]["content"] == result["answer"] == r["answer"]  # the final answer is the tool's
        assert r["composite"] == score_item(q, r["answer"]).composite and r["gold"] == q.answer
        assert {t["function"]["name"] for t in r["tools"]} >= {"residue_hbonds", "pocket_hbonds"}


def test_loss_mask_covers_exactly_the_assistant_turns(trained):
    cfg, _, folder = trained
    from transformers import AutoImageProcessor, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    processor = F.build_processor(tokenizer, AutoImageProcessor.from_pretrained(folder, local_files_only=True))
    row = F.read_transcripts(cfg.work_dir / "transcripts-tools.jsonl")[0]
    enc = F.encode(processor, row, 4096)
    ids, labels = enc.input_ids.tolist(), enc.labels.tolist()
    taught = tokenizer.decode([i for i, l in zip(ids, labels) if l != -100])
    call = row["messages"][2]["tool_calls"][0]["function"]
    want = (f'<tool_call>\n{{"name": "{call["name"]}", "arguments": {call["arguments"]}}}\n</tool_call><|im_end|>'
            f'{row["messages"][4]["content"]}<|im_end|>')
    assert taught == want
    assert enc.n_label_tokens < enc.n_tokens / 2  # the prompt, images and tool result are not trained


def test_training_log_checkpoint_and_reload(trained, qset):
    cfg, log, folder = trained
    for name in ("model.safetensors", "config.json", "tokenizer.json", "preprocessor_config.json",
                 "chat_template.jinja", "training_log.json", "loss.png"):
        assert (folder / name).is_file(), name
    saved = json.loads((folder / "training_log.json").read_text())
    train = saved["train"]
    assert train["optimizer_steps"] == 40 and len(train["loss"]) == 40
    first, last = sum(train["loss"][:8]) / 8, sum(train["loss"][-8:]) / 8
    assert last < 0.6 * first  # it learns the four transcripts (per-step losses are single samples)
    assert saved["seconds"]["train"] > 0 and saved["memory"]["process_peak_rss_mb"] > 0
    assert saved["data"]["samples"] == 4 and saved["seed"] == 0
    # reload through the planner and generate from a question with the tool specs
    q = read_questions(qset)[0]
    planner = make_planner(f"transformers:{folder}", max_new_tokens=12)
    desc = planner.describe()
    assert desc["model_type"] == "qwen2_5_vl"
    size = json.loads((folder / "preprocessor_config.json").read_text())["size"]
    assert size["longest_edge"] == saved["pixels"]["max_pixels"] == 28 * 28 * 4
    row = F.read_transcripts(cfg.work_dir / "transcripts-tools.jsonl")[0]
    reply = planner.step(PlannerInput(q.task, build_messages(q.question, q.image_paths(qset.parent)), row["tools"]))
    assert reply.info["new_tokens"] >= 1 and isinstance(reply.raw, str)


def test_training_sees_what_generation_sees(trained):
    """The training forward and the planner's generation give the same logits on the same prompt
    (the multimodal rotary positions of the image tokens included)."""
    cfg, _, folder = trained
    row = F.read_transcripts(cfg.work_dir / "transcripts-tools.jsonl")[1]
    planner = make_planner(f"transformers:{folder}", min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 4, max_new_tokens=1)
    prompt = {**row, "messages": row["messages"][:2]}
    text, images = planner.render_prompt(PlannerInput(row["task"], prompt["messages"], row["tools"]))
    enc = dict(planner.processor(text=[text], images=images, return_tensors="pt"))
    x = F.encode(F.build_processor(planner.tokenizer, planner.processor.image_processor), row, 10 ** 9)
    n = enc["input_ids"].shape[1]
    assert x.input_ids[:n].tolist() == enc["input_ids"][0].tolist()  # training text starts with the prompt
    with torch.no_grad():
        gen = planner.model.generate(**enc, max_new_tokens=1, do_sample=False, output_logits=True,
                                     return_dict_in_generate=True)
        kwargs = F.forward_kwargs(x, labels=False)
        full = planner.model(**kwargs).logits[0, n - 1]
    assert torch.allclose(gen.logits[0][0], full, atol=1e-4)


def test_identifier_augmentation_is_consistent(trained):
    """Fresh PDB IDs and residue numbers replace the old ones everywhere in a conversation except image paths."""
    import random

    cfg, _, _ = trained
    rows = F.read_transcripts(cfg.work_dir / "transcripts-tools.jsonl")
    row = next(r for r in rows if r["task"] == "residue_ligand_interaction")
    new = F.augment_row(row, random.Random(3), ("pdb_ids", "residue_numbers"))
    old_args = json.loads(row["messages"][2]["tool_calls"][0]["function"]["arguments"])
    new_args = json.loads(new["messages"][2]["tool_calls"][0]["function"]["arguments"])
    assert new_args["pdb_id"] != old_args["pdb_id"] and new_args["residue"] != old_args["residue"]
    assert new_args["chain"] == old_args["chain"]
    question = new["messages"][1]["content"][-1]["text"]
    assert f"PDB entry {new_args['pdb_id']}" in question and f"{new_args['residue']} of chain" in question
    result = json.loads(new["messages"][3]["content"])["result"]
    assert result["residue"] == new_args["residue"]
    texts = [m["content"] if isinstance(m["content"], str) else " ".join(p.get("text", "") for p in m["content"])
             for m in new["messages"]]
    text = json.dumps(texts + [new["messages"][2]["tool_calls"]])
    assert old_args["pdb_id"].upper() not in text.upper()
    paths = [p["path"] for m in new["messages"] if isinstance(m["content"], list) for p in m["content"]
             if p.get("type") == "image"]
    assert all(Path(p).is_file() for p in paths)  # image paths untouched
    assert new["messages"][4]["content"] == row["messages"][4]["content"]  # T4 answers name no number


def test_same_seed_same_weights(trained, tmp_path, qset):
    cfg, log, folder = trained
    from safetensors.torch import load_file

    again = _config(tmp_path, qset, training={"max_steps": 40}, work_dir=str(cfg.work_dir))
    log2 = F.finetune(again, "tools", progress=False, out=tmp_path / "again")
    assert log2["train"]["loss"] == log["train"]["loss"]
    a, b = load_file(folder / "model.safetensors"), load_file(tmp_path / "again" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_checkpoint_fine_tuning_and_lora_guard(trained, tmp_path, qset):
    cfg, _, folder = trained
    full = _config(tmp_path, qset, model={"base": str(folder), "lora": None},
                   training={"max_steps": 2}, work_dir=str(cfg.work_dir))
    log = F.finetune(full, "direct", progress=False, out=tmp_path / "full")
    assert log["model"]["kind"] == "checkpoint" and log["train"]["optimizer_steps"] == 2
    assert (tmp_path / "full" / "model.safetensors").is_file()
    lora = _config(tmp_path, qset, model={"base": str(folder), "lora": {"r": 4}}, work_dir=str(cfg.work_dir))
    if importlib.util.find_spec("peft") is None:
        with pytest.raises(EvalError, match="peft"):
            F.finetune(lora, "direct", progress=False, out=tmp_path / "lora")
        assert not (tmp_path / "lora").exists()
    with pytest.raises(EvalError, match="not a local checkpoint"):
        F.finetune(_config(tmp_path, qset, model={"base": str(tmp_path / "nothing")}, work_dir=str(cfg.work_dir)),
                   "direct", progress=False, out=tmp_path / "x")


def test_cli_bad_config_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntraining: {epochs: 1, bogus: 2}\ntrain_set: {structures: ., split: test}\n")
    assert F.main(["--config", str(bad), "--flavour", "direct"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bogus" in err
