"""Tool calls out of untrusted model text: ``json.loads`` and nothing else, never ``eval``.

Chat templates of the Qwen2.5/Qwen3 families (and Hermes-style models) ask the model to
write each call as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``. An endpoint
with a tool parser returns structured ``tool_calls`` instead, whose ``arguments`` is a JSON
string; both end up as :class:`ToolCall`. A call that cannot be parsed is kept, with its
``error``, so the loop can tell the model what was wrong instead of silently ignoring it.
Schema validation happens in the registry, against the tool's declared inputs.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
THINK_RE = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
FENCE_RE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
MAX_CALLS_PER_TURN = 8


@dataclass(frozen=True)
class ToolCall:
    """One requested call. ``arguments`` is None and ``error`` says why when parsing failed."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    error: str | None = None
    raw: str = ""

    def to_message(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` entry (arguments as a JSON string, as the API expects)."""
        args = self.arguments if self.arguments is not None else {}
        return {"id": self.id, "type": "function",
                "function": {"name": self.name or "invalid", "arguments": json.dumps(args, ensure_ascii=False)}}

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "error": self.error, "raw": self.raw}


def strip_thinking(text: str) -> str:
    """Remove ``<think>…</think>`` blocks (Qwen3 thinking mode) from model text."""
    return THINK_RE.sub("", text or "").strip()


def call_from_object(obj: Any, call_id: str, raw: str = "") -> ToolCall:
    """A call from a decoded JSON object: ``{"name", "arguments"}`` or ``{"function": {...}}``."""
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    if not isinstance(obj, dict):
        return ToolCall(call_id, "", None, f"a tool call must be a JSON object, got {type(obj).__name__}", raw)
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return ToolCall(call_id, "", None, 'a tool call needs a string "name"', raw)
    name = name.strip()
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            return ToolCall(call_id, name, None, f"arguments of {name} are not valid JSON: {exc.msg}", raw)
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return ToolCall(call_id, name, None, f"arguments of {name} must be a JSON object", raw)
    return ToolCall(call_id, name, args, None, raw)


def _decode(text: str) -> Any:
    """``json.loads`` of a block, tolerating code fences and trailing text after the object."""
    text = text.strip()
    m = FENCE_RE.match(text)
    if m:
        text = m.group(1).strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        obj, _ = json.JSONDecoder().raw_decode(text)  # raises JSONDecodeError again if no object at all
        return obj


def parse_tool_calls(text: str, id_prefix: str = "call") -> tuple[str, list[ToolCall]]:
    """Split model text into (text outside calls, calls).

    Calls are ``<tool_call>…</tool_call>`` blocks (an unclosed last block counts: generation
    often stops at the closing tag); without tags, a reply that is exactly one JSON object
    with a ``name`` and ``arguments`` (optionally in a code fence) is taken as one call.
    """
    text = strip_thinking(text or "")
    calls: list[ToolCall] = []
    blocks = TOOL_CALL_RE.findall(text)
    if blocks:
        for i, block in enumerate(blocks[:MAX_CALLS_PER_TURN]):
            cid = f"{id_prefix}_{i}"
            try:
                obj = _decode(block)
            except json.JSONDecodeError as exc:
                calls.append(ToolCall(cid, "", None, f"tool call is not valid JSON: {exc.msg}", block.strip()))
                continue
            calls.append(call_from_object(obj, cid, block.strip()))
        rest = TOOL_CALL_RE.sub("", text).strip()
        return rest, calls
    stripped = text.strip()
    if stripped.startswith(("{", "```")):
        try:
            obj = _decode(stripped)
        except json.JSONDecodeError:
            return stripped, []
        if isinstance(obj, dict) and ("name" in obj or "function" in obj) and (
                "arguments" in obj or "parameters" in obj or "function" in obj):
            return "", [call_from_object(obj, f"{id_prefix}_0", stripped)]
    return stripped, []
