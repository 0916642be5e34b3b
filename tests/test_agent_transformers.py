"""The ``transformers:PATH`` planner on tiny Qwen2.5-VL / Qwen3-VL models built here from configs.

Random weights write garbage, so these tests check the path, not the words: the real chat
template (the shipped tool template for Qwen2.5-VL) puts the tool section and every image
into the prompt, the processor expands the images within the pixel limits, generation
runs, and the parser survives the garbage. With a scripted generation the real decode and
parse path extracts the calls. Loading refuses non-safetensors weights and never runs code
from the model folder.
"""
from __future__ import annotations

import json

import pytest
import torch

from agent_support import generate, save_tiny_qwen
from misi_agent.agent.context import AgentContext
from misi_agent.agent.loop import answer_question, build_messages
from misi_agent.agent.planners import make_planner
from misi_agent.agent.planners.base import PlannerError, PlannerInput
from misi_agent.agent.planners.transformers_vlm import QWEN2_5_VL_TOOLS_TEMPLATE
from misi_agent.agent.store import StructureStore
from misi_agent.agent.toolset import build_registry
from misi_agent.bench.question import read_questions

MIN_PX, MAX_PX = 28 * 28 * 4, 28 * 28 * 16
VISION = "<|vision_start|><|image_pad|><|vision_end|>"


@pytest.fixture(scope="module")
def qset(tmp_path_factory):
    path = generate(tmp_path_factory.mktemp("bench") / "set", "translation", 1)
    return path, read_questions(path)


@pytest.fixture(scope="module")
def qwen25(tmp_path_factory):
    folder = save_tiny_qwen(tmp_path_factory.mktemp("models") / "tiny-qwen2.5-vl", "qwen2_5_vl")
    return make_planner(f"transformers:{folder}", min_pixels=MIN_PX, max_pixels=MAX_PX, max_new_tokens=12)


def _inputs(qset, planner_tools=True):
    path, qs = qset
    q = qs[0]
    images = q.image_paths(path.parent)
    registry = build_registry(AgentContext(images=images, store=StructureStore(use_env=False)))
    return q, images, registry, PlannerInput(q.task, build_messages(q.question, images), registry.specs())


def test_prompt_has_the_tool_section_and_every_image(qwen25, qset):
    q, images, registry, inp = _inputs(qset)
    desc = qwen25.describe()
    assert desc["model_type"] == "qwen2_5_vl" and desc["chat_template"] == QWEN2_5_VL_TOOLS_TEMPLATE.name
    assert (desc["min_pixels"], desc["max_pixels"]) == (MIN_PX, MAX_PX) and desc["trust_remote_code"] is False
    text, pil_images = qwen25.render_prompt(inp)
    assert text.count(VISION) == len(images) == len(pil_images) == 4
    assert "# Tools" in text and "<tools>" in text and "</tools>" in text
    tools_block = text.split("XML tags:\n<tools>")[1].split("</tools>")[0]
    listed = [json.loads(line)["function"]["name"] for line in tools_block.strip().splitlines()]
    assert listed == registry.names()
    assert q.question in text and text.endswith("<|im_start|>assistant\n")
    # the processor expands each image into its vision tokens, within the pixel limits
    enc = qwen25.processor(text=[text], images=pil_images, return_tensors="pt")
    grid = enc["image_grid_thw"]
    assert grid.shape == (4, 3)
    patch = qwen25.processor.image_processor.patch_size
    for t, h, w in grid.tolist():
        assert MIN_PX <= h * w * patch * patch <= MAX_PX
    n_pad = int((enc["input_ids"] == qwen25.processor.image_token_id).sum())
    assert n_pad == int(grid.prod(dim=1).sum()) // 4


def test_tool_turns_render_through_the_template(qwen25, qset):
    q, images, registry, inp = _inputs(qset)
    messages = inp.messages + [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "structure_info", "arguments": '{"pdb_id": "6yqw"}'}},
            {"id": "c2", "type": "function", "function": {"name": "pocket_hbonds", "arguments": {"pdb_id": "6yqw"}}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "structure_info", "content": '{"result": 1}'},
        {"role": "tool", "tool_call_id": "c2", "name": "pocket_hbonds", "content": '{"error": "x"}'},
    ]
    text, _ = qwen25.render_prompt(PlannerInput(q.task, messages, inp.tools))
    assert '<tool_call>\n{"name": "structure_info", "arguments": {"pdb_id": "6yqw"}}\n</tool_call>' in text
    assert '<tool_call>\n{"name": "pocket_hbonds", "arguments": {"pdb_id": "6yqw"}}\n</tool_call>' in text
    # consecutive tool results share one user turn, each in its own <tool_response> block
    assert ('<|im_start|>user\n<tool_response>\n{"result": 1}\n</tool_response>\n<tool_response>\n{"error": "x"}\n'
            '</tool_response><|im_end|>\n<|im_start|>assistant\n') in text


def test_generation_runs_and_garbage_is_parsed_without_a_crash(qwen25, qset):
    path, qs = qset
    result = answer_question(qs[0], path.parent, qwen25, StructureStore(use_env=False), max_turns=2)
    assert 1 <= result.trace.turns <= 2
    first = result.trace.steps[0]
    assert first.info["images"] == 4 and first.info["prompt_tokens"] > 100 and 1 <= first.info["new_tokens"] <= 12
    assert isinstance(first.raw, str)
    # whatever the garbage was, the run ended with an answer or a readable error
    assert result.answer or result.error
    assert result.trace.planner["max_pixels"] == MAX_PX


def test_scripted_generation_yields_tool_calls(qwen25, qset, monkeypatch):
    q, images, registry, inp = _inputs(qset)
    script = ('I will check the structure.\n<tool_call>\n{"name": "structure_info", "arguments": {"pdb_id": "6yqw", '
              '"ligand": "82I"}}\n</tool_call><|im_end|>')
    script_ids = qwen25.tokenizer(script, add_special_tokens=False, return_tensors="pt")["input_ids"]
    real_generate = qwen25.model.generate

    def scripted(**kwargs):
        real_generate(**{**kwargs, "max_new_tokens": 1})  # the real forward pass still runs
        return torch.cat([kwargs["input_ids"], script_ids], dim=1)

    monkeypatch.setattr(qwen25.model, "generate", scripted)
    reply = qwen25.step(inp)
    assert reply.text == "I will check the structure."
    assert [(c.name, c.arguments, c.error) for c in reply.tool_calls] == [
        ("structure_info", {"pdb_id": "6yqw", "ligand": "82I"}, None)]
    assert registry.call(reply.tool_calls[0].name, reply.tool_calls[0].arguments).output["ligand"]["code"] == "82I"


def test_qwen3_vl_family_loads_and_steps(tmp_path, qset):
    folder = save_tiny_qwen(tmp_path / "tiny-qwen3-vl", "qwen3_vl")
    planner = make_planner(f"transformers:{folder}", min_pixels=32 * 32 * 4, max_pixels=32 * 32 * 16, max_new_tokens=4)
    q, images, registry, inp = _inputs(qset)
    text, pil = planner.render_prompt(inp)
    assert planner.describe()["model_type"] == "qwen3_vl"
    assert text.count(VISION) == 4 and "<tools>" in text  # no template in the folder: the shipped one
    reply = planner.step(inp)
    assert reply.info["images"] == 4 and reply.info["new_tokens"] <= 4


def test_loading_refuses_unsafe_or_unknown_folders(tmp_path):
    folder = save_tiny_qwen(tmp_path / "bin-weights", "qwen2_5_vl")
    with pytest.raises(PlannerError, match="min_pixels <= max_pixels"):
        make_planner(f"transformers:{folder}", min_pixels=10, max_pixels=5)
    from safetensors.torch import load_file

    weights = load_file(folder / "model.safetensors")
    torch.save(weights, folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    with pytest.raises(PlannerError, match="no \\*.safetensors weights"):
        make_planner(f"transformers:{folder}")
    with pytest.raises(PlannerError, match="not a local model folder"):
        make_planner(f"transformers:{tmp_path / 'nothing'}")
    # a folder asking for its own code: the code never runs without --trust-remote-code
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "code-ran"
    (evil / "configuration_evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    (evil / "config.json").write_text(json.dumps({"model_type": "evil",
                                                  "auto_map": {"AutoConfig": "configuration_evil.EvilConfig"}}))
    (evil / "model.safetensors").write_bytes(b"")
    with pytest.raises(PlannerError, match="custom code"):
        make_planner(f"transformers:{evil}")
    assert not marker.exists()


def test_cli_answer_with_a_local_model_records_pixel_limits(qwen25, qset, tmp_path, capsys):
    from misi_agent.cli import main

    path, qs = qset
    qfile = path.parent / qs[0].images[0].rsplit("/", 1)[0] / "question.json"
    rc = main(["answer", str(qfile), "--planner", f"transformers:{qwen25.path}", "--model", "tiny", "--json",
               "--max-turns", "1", "--max-new-tokens", "4", "--min-pixels", str(MIN_PX), "--max-pixels", str(MAX_PX),
               "--trace", str(tmp_path / "trace.json")])
    obj = json.loads(capsys.readouterr().out)
    assert rc == (0 if obj["answer"] else 1)
    assert obj["planner"]["model"] == "tiny" and obj["planner"]["min_pixels"] == MIN_PX
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert trace["planner"]["max_pixels"] == MAX_PX and trace["planner"]["trust_remote_code"] is False
    assert trace["steps"][0]["info"]["images"] == 4
