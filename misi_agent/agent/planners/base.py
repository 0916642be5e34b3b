"""The planner interface: one step of a conversation in, text or tool calls out.

Every planner (the deterministic router, a local transformers VLM, an OpenAI-compatible
endpoint) sees the same thing a test taker sees: the conversation so far (the question's
text and images, then its own tool calls and their results) plus the task id and the
OpenAI-style specs of the tools it may call. It answers with either tool calls or a final
answer (text without calls). The loop (:mod:`misi_agent.agent.loop`) does the rest.

Messages use the OpenAI chat shape, with images as local paths:

* ``{"role": "system", "content": str}``
* ``{"role": "user", "content": [{"type": "text", "text": ...}, {"type": "image", "path": ...}]}``
* ``{"role": "assistant", "content": str, "tool_calls": [{"id", "type": "function",
  "function": {"name", "arguments": JSON string}}]}``
* ``{"role": "tool", "tool_call_id": str, "name": str, "content": str}``
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from misi_agent.agent.parsing import ToolCall
from misi_agent.errors import MisiError


class PlannerError(MisiError):
    """A planner that cannot be built or cannot produce a step (one-line message)."""


@dataclass(frozen=True)
class PlannerInput:
    """What a planner gets for one step."""

    task: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]


@dataclass(frozen=True)
class PlannerReply:
    """One step's outcome: ``tool_calls`` (possibly malformed ones) or a final ``text``."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    raw: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def is_final(self) -> bool:
        return not self.tool_calls


class Planner(ABC):
    """A planner backend. ``describe()`` goes into every trace (never secrets)."""

    kind: str = "planner"

    @abstractmethod
    def step(self, inp: PlannerInput) -> PlannerReply:
        """Decide the next move for the conversation in ``inp``."""

    def describe(self) -> dict[str, Any]:
        """Name, model and settings recorded in traces (planner, model, pixel limits...)."""
        return {"planner": self.kind, "model": None}

    def close(self) -> None:
        """Release resources (model weights, connections)."""


def user_text(messages: list[dict[str, Any]]) -> str:
    """The text of the first user message (the question as the test taker reads it)."""
    for m in messages:
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, str):
                return content
            return "\n".join(part.get("text", "") for part in content if part.get("type") == "text")
    return ""


def image_paths(messages: list[dict[str, Any]]) -> list[str]:
    """Image paths of all user messages, in order (image 1 is the first)."""
    out = []
    for m in messages:
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            out.extend(part["path"] for part in m["content"] if part.get("type") == "image")
    return out
