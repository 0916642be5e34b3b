"""The ``openai:URL`` planner against a scripted OpenAI-compatible server on 127.0.0.1.

The server (http.server in a thread) records every request and answers from a script: a
structured ``tool_calls`` reply, a raw ``<tool_call>`` text reply (a server without a tool
parser), then a final answer. Checked: the request body (model, tools, images as data
URLs, tool turns), the key only in the Authorization header, never in the trace.
"""
from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent_support import generate
from misi_agent.agent.details import read_details
from misi_agent.agent.loop import answer_question
from misi_agent.agent.planners import make_planner
from misi_agent.agent.planners.base import PlannerError
from misi_agent.agent.planners.openai_api import OpenAIPlanner, chat_url
from misi_agent.agent.store import StructureStore
from misi_agent.bench.question import read_questions
from misi_agent.cli import main

SECRET = "sk-test-SECRET-4242"


class Server:
    """A scripted chat-completions endpoint that records requests."""

    def __init__(self, replies: list[tuple[int, dict]]):
        self.replies = list(replies)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server API)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body)})
                status, payload = outer.replies.pop(0) if outer.replies else (500, {"error": "script exhausted"})
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def message(content=None, tool_calls=None) -> dict:
    msg = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


@pytest.fixture(scope="module")
def qset(tmp_path_factory):
    path = generate(tmp_path_factory.mktemp("bench") / "set", "translation", 1)
    return path, read_questions(path)


def test_tool_loop_through_an_openai_endpoint(qset, tmp_path, monkeypatch):
    monkeypatch.setenv("MISI_API_KEY", SECRET)
    path, qs = qset
    q = qs[0]
    pdb = read_details(q.question).pdb_id
    replies = [
        (200, message(None, [{"id": "call_abc", "type": "function",
                              "function": {"name": "structure_info", "arguments": json.dumps({"pdb_id": pdb})}}])),
        (200, message('<tool_call>\n{"name": "structure_info", "arguments": {"pdb_id": "' + pdb + '"}}\n</tool_call>')),
        (200, message("Answer: move x 3")),
    ]
    with Server(replies) as server:
        planner = OpenAIPlanner(server.url, model="qwen2.5-vl-7b")
        result = answer_question(q, path.parent, planner, StructureStore(use_env=False))
    assert result.answer == "move x 3" and result.error is None
    assert [c["name"] for c in result.tool_calls] == ["structure_info", "structure_info"]
    assert all(c["ok"] for c in result.tool_calls)
    reqs = server.requests
    assert len(reqs) == 3 and all(r["path"] == "/v1/chat/completions" for r in reqs)
    assert all(r["headers"]["Authorization"] == f"Bearer {SECRET}" for r in reqs)
    body = reqs[0]["body"]
    assert body["model"] == "qwen2.5-vl-7b" and body["stream"] is False and body["tool_choice"] == "auto"
    assert "structure_info" in [t["function"]["name"] for t in body["tools"]]
    images = [p["image_url"]["url"] for p in body["messages"][1]["content"] if p["type"] == "image_url"]
    assert len(images) == 4 and all(u.startswith("data:image/png;base64,") for u in images)
    assert base64.b64decode(images[3].split(",", 1)[1]) == q.image_paths(path.parent)[3].read_bytes()
    assert body["messages"][1]["content"][-1] == {"type": "text", "text": q.question}
    # the second request carries the assistant's call and the tool's answer to its id
    second = reqs[1]["body"]["messages"]
    assert second[-2]["tool_calls"][0]["id"] == "call_abc"
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "call_abc"
    assert json.loads(second[-1]["content"])["result"]["pdb_id"] == pdb.upper()
    # the third request: the text-parsed call was answered too
    assert reqs[2]["body"]["messages"][-1]["role"] == "tool"
    trace_text = result.trace.to_json()
    assert SECRET not in trace_text and "base64" not in trace_text
    assert result.trace.planner["api_key"] == "from $MISI_API_KEY"
    assert result.trace.steps[0].info["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}


def test_cli_answer_with_openai_planner_keeps_the_key_out(qset, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("MISI_API_KEY", raising=False)
    path, qs = qset
    qfile = path.parent / qs[0].images[0].rsplit("/", 1)[0] / "question.json"
    with Server([(200, message("move y -1"))]) as server:
        rc = main(["answer", str(qfile), "--planner", f"openai:{server.url}", "--model", "m", "--json",
                   "--trace", str(tmp_path / "t.json")])
    out = capsys.readouterr()
    assert rc == 0
    assert json.loads(out.out)["answer"] == "move y -1"
    assert SECRET not in out.out + out.err and SECRET not in (tmp_path / "t.json").read_text()


def test_http_errors_and_bad_replies_are_planner_errors(qset):
    path, qs = qset
    with Server([(401, {"error": {"message": "bad key"}}), (200, {"nothing": True})]) as server:
        planner = OpenAIPlanner(server.url)
        r1 = answer_question(qs[0], path.parent, planner, StructureStore(use_env=False))
        r2 = answer_question(qs[0], path.parent, planner, StructureStore(use_env=False))
    assert r1.answer == "" and "HTTP 401" in r1.error and "bad key" in r1.error
    assert "reply without choices[0].message" in r2.error
    # nothing listens on this port once the server is closed
    r3 = answer_question(qs[0], path.parent, OpenAIPlanner(server.url, timeout=5), StructureStore(use_env=False))
    assert r3.error.startswith("planner failed at turn 1: ") and server.url.split("/v1")[0] in r3.error


def test_planner_specs():
    assert chat_url("http://h:8000") == "http://h:8000/v1/chat/completions"
    assert chat_url("http://h:8000/v1/") == "http://h:8000/v1/chat/completions"
    with pytest.raises(PlannerError, match="not an http"):
        make_planner("openai:ftp://x")
    with pytest.raises(PlannerError, match="unknown planner 'gpt'"):
        make_planner("gpt:x")
    with pytest.raises(PlannerError, match="expected router"):
        make_planner("transformers")
