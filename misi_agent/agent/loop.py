"""The agent loop: question → planner step → tool calls → tool results → … → final answer.

One run is short and bounded: at most ``max_turns`` planner steps. Each step either asks
for tool calls (run through the :class:`~misi_agent.agent.registry.Registry`, results sent
back as ``tool`` turns, errors included so the model can correct itself) or gives a final
answer, which is normalised to the task's exact format by :mod:`misi_agent.bench.answers`.
A final answer that does not parse gets one reminder turn (while turns remain). Without a
final answer within the limit the run ends with an empty answer and an error.

Everything is recorded in a :class:`Trace` (messages, tool calls with arguments, results,
timings, planner, model, pixel limits), saved as indented JSON a person can read. Images
appear in traces as paths; API keys never appear (planners do not put them in
``describe()``).

The planner sees only what a test taker sees: the question text, its images and the task.
The question's ``answer`` and ``meta`` (PDB ID, ligand code, generation parameters) are
never put in the conversation or given to tools.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from misi_agent.agent.parsing import ToolCall
from misi_agent.agent.planners.base import Planner, PlannerInput, PlannerReply
from misi_agent.agent.registry import Registry, ToolResult
from misi_agent.errors import MisiError

DEFAULT_MAX_TURNS = 8

SYSTEM_PROMPT = (
    "You answer questions about rendered protein-ligand complexes (MiSI-Bench). The question states the image "
    "order, the colours, the coordinate system and the exact answer format. You may call the tools listed to "
    "measure what the images show: chemistry tools compute hydrogen bonds from the 3D structure of the PDB entry "
    "named in the question, spatial tools compare the images. Call tools with JSON arguments that follow their "
    "schemas. When you know the answer, reply with the answer only, in the exact format the question asks for, "
    "and no tool call."
)
FORMAT_REMINDER = ("Your answer could not be read in the required format ({problem}). Reply with the answer only, "
                   "exactly in the output format the question gives.")


@dataclass
class TraceStep:
    """One planner step: its output, the calls it asked for and their results."""

    turn: int
    planner_seconds: float
    text: str
    raw: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    note: str = ""


@dataclass
class Trace:
    """Everything about one answered question, as readable JSON."""

    question_id: str
    task: str
    planner: dict[str, Any]
    grounding: str
    max_turns: int
    tools: list[str]
    messages: list[dict[str, Any]] = field(default_factory=list)
    steps: list[TraceStep] = field(default_factory=list)
    answer: str = ""
    raw_answer: str = ""
    error: str | None = None
    seconds: float = 0.0
    grounding_used: dict[str, str] = field(default_factory=dict)  # PDB ID -> "structure" | "images" (what tools used)
    started_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """Every executed call, in order: name, arguments, ok, output or error, seconds."""
        return [r for s in self.steps for r in s.results]

    @property
    def turns(self) -> int:
        return len(self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question_id": self.question_id,
            "task": self.task,
            "answer": self.answer,
            "raw_answer": self.raw_answer,
            "error": self.error,
            "planner": self.planner,
            "grounding": self.grounding,
            "grounding_used": dict(self.grounding_used),
            "max_turns": self.max_turns,
            "turns": self.turns,
            "seconds": round(self.seconds, 3),
            "started_at": self.started_at,
            "tools": self.tools,
            "steps": [vars(s) for s in self.steps],
            "messages": self.messages,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2, default=str)

    def save(self, path: str | Path) -> Path:
        """Write the trace as indented JSON, atomically (temp file, then rename)."""
        path = Path(path)
        if not path.parent.is_dir():
            raise MisiError(f"--trace {path}: folder {path.parent} does not exist")
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(self.to_json() + "\n")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path


@dataclass(frozen=True)
class AgentResult:
    """The normalised answer (``""`` when there is none), the task and the trace."""

    answer: str
    task: str
    trace: Trace

    @property
    def error(self) -> str | None:
        return self.trace.error

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return self.trace.tool_calls


def build_messages(text: str, images: Sequence[str | Path], system: str | None = SYSTEM_PROMPT) -> list[dict[str, Any]]:
    """The opening conversation: the system prompt, then one user turn with every image
    (each preceded by its number, as the question refers to "image k") and the question text."""
    content: list[dict[str, Any]] = []
    for k, path in enumerate(images, start=1):
        content.append({"type": "text", "text": f"Image {k}:"})
        content.append({"type": "image", "path": str(path)})
    content.append({"type": "text", "text": text})
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": content})
    return messages


def normalise_answer(question, text: str) -> str:
    """The model's final text in the task's exact answer format, or :class:`MisiError`.

    Parsing is :func:`misi_agent.bench.answers.parse_prediction` (the scorer's own reader:
    prose, code fences, ``Answer:`` markers, ``<answer>`` tags are tolerated); formatting
    writes the canonical form: ``move x 3`` / ``roll y 15`` / ``move z 50``, ``roll x 75, move
    x -14``, a letter, ``No`` / ``Yes: ARG NH2, O1B; ...``, ``ARG 45 NH2 A, O1B; ...``.
    """
    from misi_agent.bench import answers as A
    from misi_agent.bench import tasks as T
    from misi_agent.camera import Command

    info = T.task_info(question.task)
    parsed = A.parse_prediction(question, text)
    if parsed is None:
        raise MisiError(f"no {info.title.lower()} answer found in {_clip(text)!r} (expected e.g. {info.answer_example!r})")
    if isinstance(parsed, A.AxisValue):
        if parsed.axis == A.NO_AXIS:
            raise MisiError(f"{_clip(text)!r} is not a single {parsed.op} along one axis")
        return str(Command(parsed.op, parsed.axis, parsed.value))
    if isinstance(parsed, A.DockingAnswer):
        parts = [str(Command("roll", parsed.roll.axis, parsed.roll.value))] if parsed.roll else []
        if parsed.move is not None:
            parts += [str(Command("move", ax, v)) for ax, v in zip("xyz", parsed.move) if abs(v) > 1e-9 or ax == "x"]
        return ", ".join(parts)
    if isinstance(parsed, str):
        return parsed
    if isinstance(parsed, A.InteractionAnswer):
        if info.metric == "interactions_residue":
            if parsed.verdict == "no":
                return "No"
            if not parsed.bonds:
                raise MisiError("the answer says Yes but lists no H-bond")
            return A.format_residue_answer(parsed.bonds)
        if parsed.verdict == "no" or not parsed.bonds:
            return "None"
        return "; ".join(_pocket_form(b) for b in parsed.bonds)
    raise MisiError(f"cannot format a {type(parsed).__name__} answer")  # pragma: no cover - parse_prediction is closed


def _pocket_form(b) -> str:
    """``ARG 45 NH2 A, O1B``; a bond the model wrote without number or chain keeps what it has."""
    head = " ".join(p for p in (b.residue_name, b.residue_number, b.residue_atom, b.chain) if p)
    return f"{head}, {b.ligand_atom}"


def _clip(text: str, n: int = 80) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


def run_agent(*, question_id: str, task: str, text: str, images: Sequence[str | Path], planner: Planner,
              registry: Registry, normalise: Callable[[str], str], max_turns: int = DEFAULT_MAX_TURNS,
              grounding: str = "structure", system: str | None = SYSTEM_PROMPT) -> AgentResult:
    """Answer one question. ``normalise(text)`` returns the answer in the task's exact
    format or raises :class:`MisiError`; planner failures end the run with an error (never a crash)."""
    if max_turns < 1:
        raise MisiError("--max-turns must be at least 1")
    t_start = time.perf_counter()
    messages = build_messages(text, images, system)
    tools = registry.specs()
    trace = Trace(question_id=question_id, task=task, planner=planner.describe(), grounding=grounding,
                  max_turns=max_turns, tools=registry.names(), messages=messages)
    final = False
    for turn in range(1, max_turns + 1):
        t0 = time.perf_counter()
        try:
            reply = planner.step(PlannerInput(task=task, messages=messages, tools=tools))
        except MisiError as exc:
            trace.error = f"planner failed at turn {turn}: {exc}"
            break
        except Exception as exc:  # a backend bug must not end a whole run of questions
            detail = str(exc).splitlines()[0] if str(exc) else ""
            trace.error = f"planner failed at turn {turn}: {type(exc).__name__}: {detail}"
            break
        step = TraceStep(turn=turn, planner_seconds=round(time.perf_counter() - t0, 4), text=reply.text,
                         raw=reply.raw, info=dict(reply.info))
        trace.steps.append(step)
        if not reply.is_final:
            trace.error = None
            _run_calls(reply, registry, messages, step)
            continue
        trace.raw_answer = reply.text
        try:
            trace.answer = normalise(reply.text)
        except MisiError as exc:
            problem = str(exc)
            step.note = f"answer not in the task's format: {problem}"
            trace.error = f"final answer not in the task's format: {problem}"
            messages.append({"role": "assistant", "content": reply.text})
            messages.append({"role": "user", "content": [
                {"type": "text", "text": FORMAT_REMINDER.format(problem=problem)}]})
            continue
        trace.error = None
        final = True
        break
    if not final and trace.error is None:
        trace.error = f"no final answer within {max_turns} turns"
    trace.seconds = time.perf_counter() - t_start
    return AgentResult(answer=trace.answer, task=task, trace=trace)


def _run_calls(reply: PlannerReply, registry: Registry, messages: list[dict[str, Any]], step: TraceStep) -> None:
    """Execute the reply's calls; append the assistant turn and one tool turn per call."""
    calls: list[ToolCall] = list(reply.tool_calls)
    messages.append({"role": "assistant", "content": reply.text, "tool_calls": [c.to_message() for c in calls]})
    for call in calls:
        step.tool_calls.append(call.to_dict())
        if call.error is not None:
            result = ToolResult(call.name or "invalid", call.raw, False, error=call.error)
        else:
            result = registry.call(call.name, call.arguments)
        step.results.append(result.to_dict())
        messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name or "invalid",
                         "content": result.content()})


def answer_question(question, base_dir: str | Path, planner: Planner, store, *, grounding: str = "structure",
                    max_turns: int = DEFAULT_MAX_TURNS, system: str | None = SYSTEM_PROMPT) -> AgentResult:
    """Answer a :class:`~misi_agent.bench.question.Question` whose images are relative to ``base_dir``.

    Only the question's text, images and task reach the planner and the tools; its
    ``answer`` and ``meta`` are not read.
    """
    from misi_agent.agent.context import AgentContext
    from misi_agent.agent.toolset import build_registry

    images = question.image_paths(base_dir)
    context = AgentContext(images=images, store=store, grounding=grounding)
    registry = build_registry(context)
    result = run_agent(question_id=question.id, task=question.task, text=question.question, images=images,
                       planner=planner, registry=registry, normalise=lambda text: normalise_answer(question, text),
                       max_turns=max_turns, grounding=grounding, system=system)
    result.trace.grounding_used = dict(context.groundings_used)
    return result
