"""The agent loop driven by scripted model outputs, on questions generated from real fixtures.

The scripted planner stands in for a model; the tools (structure_info on the committed
entries), the registry, the parsing, the loop and the answer normalisation are real.
"""
from __future__ import annotations

import json
import re

import pytest

from agent_support import ScriptedPlanner, generate
from misi_agent.agent.context import AgentContext
from misi_agent.agent.details import read_details
from misi_agent.agent.loop import FORMAT_REMINDER, answer_question, normalise_answer, run_agent
from misi_agent.agent.parsing import parse_tool_calls
from misi_agent.agent.planners.base import Planner, PlannerError
from misi_agent.agent.registry import Registry, Tool
from misi_agent.agent.store import StructureStore
from misi_agent.agent.toolset import build_registry
from misi_agent.bench.question import Question, read_questions
from misi_agent.errors import MisiError


@pytest.fixture(scope="module")
def qset(tmp_path_factory):
    path = generate(tmp_path_factory.mktemp("bench") / "set", "translation", 2)
    return path, read_questions(path)


def call(name: str, args: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def run(q, base, outputs, max_turns=6):
    planner = ScriptedPlanner(outputs)
    result = answer_question(q, base, planner, StructureStore(use_env=False), max_turns=max_turns)
    return result, planner


def test_good_call_then_answer(qset, tmp_path):
    path, qs = qset
    q = qs[0]
    d = read_details(q.question)
    result, planner = run(q, path.parent, [call("structure_info", {"pdb_id": d.pdb_id}),
                                           "The scene moved to the right.\n\nAnswer: **move x 3**"])
    assert result.error is None and result.answer == "move x 3"
    assert result.trace.raw_answer.endswith("**move x 3**")
    # the first turn saw the question text and every image, in order, and no answer or meta
    first = planner.seen[0].messages
    user = first[1]["content"]
    assert [p["path"] for p in user if p["type"] == "image"] == [str(p) for p in q.image_paths(path.parent)]
    assert user[-1]["text"] == q.question
    assert "meta" not in json.dumps(first) and json.dumps(q.meta["params"]) not in json.dumps(first)
    # the tool's result went back as a tool turn answering the call's id
    second = planner.seen[1].messages
    assert second[-2]["role"] == "assistant" and second[-2]["tool_calls"][0]["function"]["name"] == "structure_info"
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == second[-2]["tool_calls"][0]["id"]
    out = json.loads(second[-1]["content"])["result"]
    assert out["ligand"]["code"] == q.meta["ligand"] and out["pdb_id"] == d.pdb_id.upper()
    assert out["pocket_residues"] and all(re.fullmatch(r"[A-Z]{3} -?\d+[A-Z]? \w+", r) for r in out["pocket_residues"])
    # the trace: calls with arguments, results, timings, planner; readable JSON on disk
    calls = result.tool_calls
    assert [c["name"] for c in calls] == ["structure_info"] and calls[0]["ok"]
    assert calls[0]["arguments"] == {"pdb_id": d.pdb_id} and calls[0]["seconds"] >= 0
    saved = json.loads(result.trace.save(tmp_path / "trace.json").read_text())
    assert saved["answer"] == "move x 3" and saved["turns"] == 2 and saved["planner"]["max_pixels"] == 2
    assert saved["steps"][0]["results"][0]["output"]["ligand"]["code"] == q.meta["ligand"]
    assert "\n  " in (tmp_path / "trace.json").read_text()  # indented for people


def test_malformed_json_is_sent_back_and_the_model_recovers(qset):
    path, qs = qset
    pdb = read_details(qs[1].question).pdb_id
    bad = '<tool_call>{"name": "structure_info", "arguments": {pdb_id: ' + pdb + '}}</tool_call>'
    result, planner = run(qs[1], path.parent, [bad, call("structure_info", {"pdb_id": pdb}), "move y -2"])
    assert result.answer == "move y -2" and result.error is None
    first = result.trace.steps[0]
    assert first.tool_calls[0]["error"].startswith("tool call is not valid JSON")
    assert not first.results[0]["ok"]
    tool_turn = planner.seen[1].messages[-1]
    assert tool_turn["role"] == "tool" and "not valid JSON" in json.loads(tool_turn["content"])["error"]
    assert result.trace.steps[1].results[0]["ok"]


def test_unknown_tool_and_bad_arguments_come_back_as_errors(qset):
    path, qs = qset
    pdb = read_details(qs[0].question).pdb_id
    outputs = [
        call("read_answer_key", {}),
        call("structure_info", {"pdb_id": "XYZ"}),
        call("structure_info", {}),
        call("structure_info", {"pdb_id": pdb, "answer": "move x 1"}),
        '<tool_call>{"name": "structure_info", "arguments": [1, 2]}</tool_call>',
        "move x 1",
    ]
    result, planner = run(qs[0], path.parent, outputs, max_turns=8)
    errors = [s.results[0]["error"] for s in result.trace.steps[:5]]
    assert errors[0].startswith("unknown tool 'read_answer_key'") and "structure_info" in errors[0]
    assert errors[1].startswith("invalid arguments at pdb_id")
    assert "'pdb_id' is a required property" in errors[2]
    assert "Additional properties are not allowed" in errors[3]
    assert "must be a JSON object" in errors[4]
    assert result.answer == "move x 1"
    contents = [json.loads(m["content"]) for m in planner.seen[-1].messages if m["role"] == "tool"]
    assert len(contents) == 5 and all("error" in c for c in contents)


def test_tool_errors_reach_the_model(qset):
    path, qs = qset
    result, planner = run(qs[0], path.parent, [call("structure_info", {"pdb_id": "9zzz"}), "move x 2"])
    err = result.trace.steps[0].results[0]["error"]
    assert "no structure file for PDB ID 9ZZZ" in err and "--allow-download" in err
    assert "9ZZZ" in planner.seen[1].messages[-1]["content"]
    assert result.answer == "move x 2"


def test_no_final_answer_within_the_turn_limit(qset):
    path, qs = qset
    pdb = read_details(qs[0].question).pdb_id
    result, _ = run(qs[0], path.parent, [call("structure_info", {"pdb_id": pdb})] * 10, max_turns=3)
    assert result.answer == "" and result.error == "no final answer within 3 turns"
    assert result.trace.turns == 3 and len(result.tool_calls) == 3


def test_unreadable_final_answer_gets_one_reminder(qset):
    path, qs = qset
    result, planner = run(qs[0], path.parent, ["It moved a little, hard to say.", "Answer: move y -2"])
    assert result.answer == "move y -2" and result.error is None
    reminder = planner.seen[1].messages[-1]["content"][0]["text"]
    assert reminder.startswith(FORMAT_REMINDER.split("(")[0])
    assert "not in the task's format" in result.trace.steps[0].note
    result, _ = run(qs[0], path.parent, ["no idea", "still no idea"], max_turns=2)
    assert result.answer == "" and result.error.startswith("final answer not in the task's format")


def test_planner_failure_is_recorded_not_raised(qset):
    path, qs = qset

    class Broken(Planner):
        kind = "broken"

        def step(self, inp):
            raise PlannerError("endpoint down")

    result = answer_question(qs[0], path.parent, Broken(), StructureStore(use_env=False))
    assert result.answer == "" and result.error == "planner failed at turn 1: endpoint down"


def test_registry_specs_and_direct_calls(qset):
    path, qs = qset
    ctx = AgentContext(images=qs[0].image_paths(path.parent), store=StructureStore(use_env=False))
    reg = build_registry(ctx)
    specs = reg.specs()
    assert specs[0]["type"] == "function" and specs[0]["function"]["name"] == "structure_info"
    assert specs[0]["function"]["parameters"]["required"] == ["pdb_id"]
    assert "Returns:" in specs[0]["function"]["description"]
    res = reg.call("structure_info", '{"pdb_id": "7x9k", "ligand": "8OG"}')
    assert res.ok and res.output["ligand"]["code"] == "8OG"
    assert {c["code"] for c in res.output["other_ligand_candidates"]} == {"8DG", "FRU", "GLC"}  # GLC: an additive-listed sugar, a candidate behind the others
    assert ctx.image(4) == qs[0].image_paths(path.parent)[3]
    with pytest.raises(MisiError, match="image 5 does not exist"):
        ctx.image(5)
    with pytest.raises(ValueError, match="registered twice"):
        Registry([reg.get("structure_info"), reg.get("structure_info")])
    with pytest.raises(ValueError, match="type 'object'"):
        Tool("t", "d", {"type": "array"}, "", lambda: None)


def test_images_grounding_refuses_structures(qset):
    path, qs = qset
    ctx = AgentContext(images=qs[0].image_paths(path.parent), store=StructureStore(use_env=False), grounding="images")
    res = build_registry(ctx).call("structure_info", {"pdb_id": "6yqw"})
    assert not res.ok and "structure grounding is off" in res.error


def _q(task, options=None):
    return Question("x", task, "", [], "A", options)


@pytest.mark.parametrize("task,text,expected", [
    ("translation", "Answer: **move x 3**", "move x 3"),
    ("translation", "```\nmove Y -2\n```", "move y -2"),
    ("rotation", "I believe the answer is roll z -45.", "roll z -45"),
    ("zooming", "<answer>move z 52</answer>", "move z 52"),
    ("docking", "move x -14, roll x 75", "roll x 75, move x -14"),
    ("rotation_rotation", "The answer is (C).", "C"),
    ("residue_ligand_interaction", "yes: arg nh2, o1b; ARG NE, O2G", "Yes: ARG NH2, O1B; ARG NE, O2G"),
    ("residue_ligand_interaction", "No.", "No"),
    ("pocket_ligand_interaction", "ARG 45 NH2 A, O1B\nLYS 47 NZ A, O1A", "ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A"),
])
def test_final_answers_are_normalised_to_the_task_format(task, text, expected):
    assert normalise_answer(_q(task), text) == expected


def test_normalisation_rejects_what_the_scorer_cannot_read():
    with pytest.raises(MisiError, match="no translation answer"):
        normalise_answer(_q("translation"), "it moved right")
    with pytest.raises(MisiError, match="not a single move"):
        normalise_answer(_q("translation"), "move x 3, move y 2")
    assert normalise_answer(_q("interaction_location", ["move x 1, move y 2", "move x -1, move y 2",
                                                        "move x 1, move y -2", "move x 3, move y 2"]),
                            "move x -1, move y 2") == "B"


def test_parsing_is_json_only_and_tolerant():
    text, calls = parse_tool_calls('<think>plan</think>Let me look.<tool_call>{"name": "a", "arguments": {"x": 1}}'
                                   '</tool_call><tool_call>{"name": "b", "arguments": "{\\"y\\": 2}"}</tool_call>')
    assert text == "Let me look." and [(c.name, c.arguments) for c in calls] == [("a", {"x": 1}), ("b", {"y": 2})]
    _, calls = parse_tool_calls('<tool_call>\n{"name": "a", "arguments": {}}')  # generation stopped at the tag
    assert calls[0].name == "a" and calls[0].error is None
    _, calls = parse_tool_calls('```json\n{"name": "a", "arguments": {"k": "v"}}\n```')
    assert calls[0].arguments == {"k": "v"}
    _, calls = parse_tool_calls("<tool_call>__import__('os').system('echo pwned')</tool_call>")
    assert calls[0].error.startswith("tool call is not valid JSON") and calls[0].arguments is None
    _, calls = parse_tool_calls('<tool_call>{"arguments": {}}</tool_call>')
    assert calls[0].error == 'a tool call needs a string "name"'
    text, calls = parse_tool_calls("Yes: ARG NH2, O1B")
    assert text == "Yes: ARG NH2, O1B" and calls == []
