"""Shared helpers of the agent tests: generated question sets, a scripted planner, a tiny Qwen-VL."""
from __future__ import annotations

import json
from pathlib import Path

from misi_agent.agent.parsing import parse_tool_calls
from misi_agent.agent.planners.base import Planner, PlannerInput, PlannerReply
from misi_agent.cli import main

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "misi_agent" / "data" / "structures"


def generate(out: Path, tasks: str, per_task: int, seed: int = 0, size: int = 256) -> Path:
    """Generate a question set from the committed fixtures with the benchmark generator; return questions.jsonl."""
    rc = main(["bench", "generate", "--structures", str(FIXTURES), "--out", str(out), "--tasks", tasks,
               "--per-task", str(per_task), "--split", "all", "--renderer", "raster", "--seed", str(seed),
               "--size", str(size)])
    assert rc == 0
    path = out / "questions.jsonl"
    assert path.is_file()
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class ScriptedPlanner(Planner):
    """A stand-in for a model: replies with the given texts in turn, parsed like a real model's output.

    Records what it was shown (messages, tool specs) so tests can check the conversation.
    """

    kind = "scripted"

    def __init__(self, outputs: list[str]):
        self.outputs = list(outputs)
        self.seen: list[PlannerInput] = []

    def describe(self) -> dict:
        return {"planner": self.kind, "model": "script", "min_pixels": 1, "max_pixels": 2}

    def step(self, inp: PlannerInput) -> PlannerReply:
        self.seen.append(PlannerInput(inp.task, [dict(m) for m in inp.messages], inp.tools))
        raw = self.outputs.pop(0) if self.outputs else "<tool_call>{\"name\": \"structure_info\", \"arguments\": {}}</tool_call>"
        text, calls = parse_tool_calls(raw, id_prefix=f"call_{len(self.seen)}")
        return PlannerReply(text=text, tool_calls=tuple(calls), raw=raw)


# ----------------------------------------------------------------------------- a tiny Qwen-VL

# The builder lives in the package (the fine-tuning recipe uses it too); re-exported here.
from misi_agent.agent.tiny_model import SPECIAL_TOKENS, TOOL_TOKENS, save_tiny_qwen, tiny_tokenizer  # noqa: E402,F401
