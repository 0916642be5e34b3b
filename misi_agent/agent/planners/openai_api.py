"""``openai:URL``: a planner behind an OpenAI-compatible chat completions endpoint (e.g. vLLM).

Non-streaming ``POST {URL}/chat/completions`` with the conversation (images as base64 PNG
data URLs), the tools in the request (``tools``, ``tool_choice: "auto"``) and greedy
decoding by default. The reply's structured ``tool_calls`` are used when present; a server
without a tool parser returns the model's raw ``<tool_call>…</tool_call>`` text, which is
parsed the same way as a local model's (:mod:`misi_agent.agent.parsing`).

The API key comes from the environment (``MISI_API_KEY``, else ``OPENAI_API_KEY``, or the
variable named with ``api_key_env``); it is sent only in the ``Authorization`` header and
never logged, returned by :meth:`describe` or written to traces. Only the standard library
is used (``urllib``), so no client package is needed.
"""
from __future__ import annotations

import base64
import json
import mimetypes
import os
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from misi_agent.agent.parsing import ToolCall, call_from_object, parse_tool_calls, strip_thinking
from misi_agent.agent.planners.base import Planner, PlannerError, PlannerInput, PlannerReply

API_KEY_ENVS = ("MISI_API_KEY", "OPENAI_API_KEY")
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_MAX_TOKENS = 1024


def chat_url(base: str) -> str:
    """The chat completions URL for a base URL (``http://host:8000/v1`` or the full path)."""
    base = base.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise PlannerError(f"openai planner: {base!r} is not an http(s) URL")
    if base.endswith("/chat/completions"):
        return base
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/chat/completions"


def image_data_url(path: str | Path) -> str:
    """A ``data:`` URL holding the image file's bytes (base64)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise PlannerError(f"cannot read image {p}: {exc.strerror or exc}") from None
    mime = mimetypes.guess_type(p.name)[0] or "image/png"
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def to_openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The loop's messages in the API's shape (image parts become ``image_url`` data URLs)."""
    out = []
    for m in messages:
        role = m["role"]
        content = m.get("content")
        if isinstance(content, list):
            parts = []
            for part in content:
                if part.get("type") == "image":
                    parts.append({"type": "image_url", "image_url": {"url": image_data_url(part["path"])}})
                else:
                    parts.append({"type": "text", "text": part.get("text", "")})
            content = parts
        msg: dict[str, Any] = {"role": role, "content": content if content is not None else ""}
        if role == "assistant" and m.get("tool_calls"):
            msg["tool_calls"] = m["tool_calls"]
        if role == "tool":
            msg["tool_call_id"] = m.get("tool_call_id", "")
            if m.get("name"):
                msg["name"] = m["name"]
        out.append(msg)
    return out


class OpenAIPlanner(Planner):
    """A VLM served behind an OpenAI-compatible endpoint."""

    kind = "openai"

    def __init__(self, url: str, model: str | None = None, *, api_key_env: str | None = None,
                 temperature: float = 0.0, max_tokens: int = DEFAULT_MAX_TOKENS, timeout: float = DEFAULT_TIMEOUT_S,
                 seed: int | None = 0) -> None:
        self.url = chat_url(url)
        self.model = model or "default"
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.seed = seed
        envs = (api_key_env,) if api_key_env else API_KEY_ENVS
        self._key_env = next((e for e in envs if os.environ.get(e)), None)
        self._turn = 0

    def describe(self) -> dict[str, Any]:
        return {"planner": self.kind, "model": self.model, "url": self.url, "temperature": self.temperature,
                "max_tokens": self.max_tokens, "seed": self.seed,
                "api_key": f"from ${self._key_env}" if self._key_env else "none"}

    def request_body(self, inp: PlannerInput) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": to_openai_messages(inp.messages),
                                "temperature": self.temperature, "max_tokens": self.max_tokens, "stream": False}
        if self.seed is not None:
            body["seed"] = self.seed
        if inp.tools:
            body["tools"] = inp.tools
            body["tool_choice"] = "auto"
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key_env:
            headers["Authorization"] = "Bearer " + os.environ.get(self._key_env, "")
        req = urllib.request.Request(self.url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 (user-given endpoint)
                payload = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read(500).decode("utf-8", "replace").replace("\n", " ").strip()
            raise PlannerError(f"{self.url}: HTTP {exc.code} {exc.reason}{': ' + detail if detail else ''}") from None
        except (urllib.error.URLError, socket.timeout, ConnectionError) as exc:
            raise PlannerError(f"{self.url}: {getattr(exc, 'reason', exc)}") from None
        try:
            return json.loads(payload)
        except json.JSONDecodeError:
            raise PlannerError(f"{self.url}: the reply is not JSON") from None

    def step(self, inp: PlannerInput) -> PlannerReply:
        self._turn += 1
        t0 = time.perf_counter()
        reply = self._post(self.request_body(inp))
        try:
            message = reply["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise PlannerError(f"{self.url}: reply without choices[0].message") from None
        text = message.get("content") or ""
        if not isinstance(text, str):  # some servers return content parts
            text = "".join(p.get("text", "") for p in text if isinstance(p, dict))
        info = {"seconds": round(time.perf_counter() - t0, 4), "usage": reply.get("usage"),
                "finish_reason": reply["choices"][0].get("finish_reason")}
        calls: list[ToolCall] = []
        for i, tc in enumerate(message.get("tool_calls") or []):
            cid = (tc.get("id") if isinstance(tc, dict) else None) or f"call_{self._turn}_{i}"
            calls.append(call_from_object(tc, cid, json.dumps(tc, ensure_ascii=False)))
        if calls:
            return PlannerReply(text=strip_thinking(text), tool_calls=tuple(calls), raw=text, info=info)
        rest, parsed = parse_tool_calls(text, id_prefix=f"call_{self._turn}")
        return PlannerReply(text=rest, tool_calls=tuple(parsed), raw=text, info=info)
