"""The tool registry: what a planner may call, described for a model, validated before a call.

A :class:`Tool` declares its name, a description written for a language model, its inputs as
a JSON schema (an ``object`` schema, as in OpenAI function calling) and a description of its
output (smolagents-style: typed inputs, declared output). A :class:`Registry` lists tools as
OpenAI-style function specs for every planner and calls them by name.

Model output is untrusted, so :meth:`Registry.call` never raises for a bad call: an unknown
tool, arguments that are not a JSON object or that fail the schema, and any error the tool
raises all come back as a :class:`ToolResult` with ``ok=False`` and a one-line ``error``. The
agent loop sends that text back to the model as the tool's answer, so it can correct itself.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import jsonschema
import numpy as np

from misi_agent.errors import MisiError

NAME_PATTERN = r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$"


class ToolError(MisiError):
    """A tool that cannot do what it was asked (one-line message that goes back to the model)."""


@dataclass(frozen=True)
class Tool:
    """A callable the planner may use.

    ``parameters`` is a JSON schema of type ``object``; ``func`` is called with the validated
    arguments as keyword arguments and returns something JSON-serialisable (dataclasses,
    numpy scalars and arrays, tuples and paths are converted by :func:`to_jsonable`).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    output: str
    func: Callable[..., Any] = field(compare=False, repr=False)

    def __post_init__(self) -> None:
        import re

        if not re.match(NAME_PATTERN, self.name):
            raise ValueError(f"tool name {self.name!r} is not a valid function name")
        if self.parameters.get("type") != "object":
            raise ValueError(f"tool {self.name}: parameters must be a JSON schema of type 'object'")
        jsonschema.Draft202012Validator.check_schema(dict(self.parameters))

    def spec(self) -> dict[str, Any]:
        """The OpenAI function-calling spec (also what chat templates render in ``<tools>``)."""
        description = self.description.strip()
        if self.output:
            description += f"\nReturns: {self.output.strip()}"
        return {
            "type": "function",
            "function": {"name": self.name, "description": description, "parameters": _plain(self.parameters)},
        }

    def validate(self, arguments: Any) -> str | None:
        """None when the arguments satisfy the schema, else a one-line reason."""
        if not isinstance(arguments, dict):
            return f"arguments must be a JSON object, got {type(arguments).__name__}"
        validator = jsonschema.Draft202012Validator(dict(self.parameters))
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if not errors:
            return None
        err = errors[0]
        where = "/".join(str(p) for p in err.absolute_path)
        return f"invalid arguments{(' at ' + where) if where else ''}: {err.message}"


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one call: the output or a one-line error, and how long it took."""

    name: str
    arguments: Any
    ok: bool
    output: Any = None
    error: str | None = None
    seconds: float = 0.0

    def content(self) -> str:
        """The text the model reads as the tool's answer (compact JSON)."""
        payload = {"result": self.output} if self.ok else {"error": self.error}
        return json.dumps(payload, ensure_ascii=False, separators=(", ", ": "))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": to_jsonable(self.arguments), "ok": self.ok,
                "output": self.output, "error": self.error, "seconds": round(self.seconds, 4)}


class Registry:
    """Named tools, listed as function specs and called with validated arguments."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name} registered twice")
        self._tools[tool.name] = tool

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            raise ToolError(f"unknown tool {name!r}; available: {', '.join(self._tools) or 'none'}") from None

    def specs(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """OpenAI-style function specs of the given tools (all by default), in registration order."""
        chosen = list(self._tools) if names is None else [n for n in names]
        return [self.get(n).spec() for n in chosen]

    def call(self, name: str, arguments: Any) -> ToolResult:
        """Validate and run one call. Never raises for a bad call or a failing tool."""
        t0 = time.perf_counter()
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return ToolResult(name, arguments, False, error=f"arguments are not valid JSON: {exc.msg}",
                                  seconds=time.perf_counter() - t0)
        if name not in self._tools:
            return ToolResult(name, arguments, False,
                              error=f"unknown tool {name!r}; available tools: {', '.join(self._tools) or 'none'}",
                              seconds=time.perf_counter() - t0)
        tool = self._tools[name]
        problem = tool.validate(arguments)
        if problem:
            return ToolResult(name, arguments, False, error=problem, seconds=time.perf_counter() - t0)
        try:
            output = to_jsonable(tool.func(**arguments))
        except MisiError as exc:
            return ToolResult(name, arguments, False, error=_one_line(str(exc)), seconds=time.perf_counter() - t0)
        except Exception as exc:  # a tool bug must not end the run; the model and the trace see it
            return ToolResult(name, arguments, False, error=_one_line(f"{type(exc).__name__}: {exc}"),
                              seconds=time.perf_counter() - t0)
        return ToolResult(name, arguments, True, output=output, seconds=time.perf_counter() - t0)


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0] if lines else "error"


def _plain(value: Any) -> Any:
    """A deep copy of a schema made of plain dicts and lists (Mapping proxies, tuples → lists)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def to_jsonable(value: Any) -> Any:
    """Convert tool outputs to JSON types: dataclasses, numpy values, tuples, sets, paths."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):
        return to_jsonable(value.item())
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict"):
            return to_jsonable(value.to_dict())
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if isinstance(value, (set, frozenset)):
            items = sorted(items, key=str)
        return [to_jsonable(v) for v in items]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "to_dict"):
        return to_jsonable(value.to_dict())
    return str(value)
