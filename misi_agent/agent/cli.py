"""``misi-agent answer`` and ``misi-agent run``: the agent on one question or on a question set.

    misi-agent answer QUESTION.json [--planner router|transformers:PATH|openai:URL] [--model NAME]
        [--structures DIR ...] [--grounding structure|images|auto] [--trace FILE] [--json]
    misi-agent run QUESTIONS.jsonl --out PREDICTIONS.jsonl [same options; --trace DIR]

``answer`` prints the answer (``--json``: an object with the answer, the task, the tool calls
and any error). ``run`` answers every question with a progress bar and appends one line per
question to ``--out`` as soon as it is answered (``{"id", "task", "prediction", "error", ...}``,
the format ``misi-agent bench score --pred`` reads), flushed and synced, so a crash loses
nothing: a rerun skips ids already in the file, drops a last line cut short by the crash and
carries on. A question that fails (unreadable image, unknown structure, planner error) is
recorded with ``"prediction": null`` and its error, and the run goes on.

Bad input (unreadable question file, bad option, missing folder) is one line on stderr and
exit status 2. ``answer`` exits 1 when the agent produced no answer.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from misi_agent.errors import MisiError

GROUNDING_CHOICES = ("structure", "images", "auto")


def _add_common(p: argparse.ArgumentParser, trace_help: str) -> None:
    p.add_argument("--planner", default="router", help="router (default) | transformers:PATH | openai:URL")
    p.add_argument("--model", default=None, help="model name (sent to an openai endpoint; recorded in traces)")
    p.add_argument("--structures", action="append", default=[], metavar="DIR",
                   help="folder searched for structures by PDB ID (repeatable; also $MISI_STRUCTURES; the embedded "
                        "fixtures are always searched last)")
    p.add_argument("--allow-download", action="store_true", help="download unknown entries from the RCSB")
    p.add_argument("--grounding", choices=GROUNDING_CHOICES, default="structure",
                   help="where 3D knowledge comes from: the entry's structure, a reconstruction from the question's "
                        "images, or auto (the structure when the store has it, else the images; the trace's "
                        "grounding_used says which) (default: structure)")
    p.add_argument("--max-turns", type=int, default=None, help="hard limit on planner turns (default 8)")
    p.add_argument("--min-pixels", type=int, default=None, help="transformers: min pixels per image")
    p.add_argument("--max-pixels", type=int, default=None, help="transformers: max pixels per image")
    p.add_argument("--max-new-tokens", type=int, default=None, help="tokens generated per turn")
    p.add_argument("--chat-template", default=None, metavar="FILE", help="transformers: Jinja chat template to use")
    p.add_argument("--device", default="cpu", help="transformers: torch device (cpu, cuda, cuda:1; auto = cuda if present)")
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"),
                   help="transformers: weight dtype (default: the checkpoint's)")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="transformers: allow code from the model folder to run (off by default)")
    p.add_argument("--api-key-env", default=None, metavar="VAR",
                   help="openai: environment variable holding the API key (default MISI_API_KEY, then OPENAI_API_KEY)")
    p.add_argument("--trace", default=None, help=trace_help)


def register(subparsers) -> None:
    a = subparsers.add_parser("answer", help="answer one question (question.json) with the agent",
                              description="Answer one MiSI-Bench question with the agent.")
    a.add_argument("question", help="question.json (one question; images relative to it)")
    a.add_argument("--json", action="store_true", help="print a JSON object (answer, task, tool calls, error)")
    _add_common(a, "write the trace (messages, tool calls, results, timings) to this JSON file")
    a.set_defaults(func=cmd_answer)
    r = subparsers.add_parser("run", help="answer a question set, resumable",
                              description="Answer every question of a .jsonl/.json set; append predictions.")
    r.add_argument("questions", help="questions.jsonl (or .json)")
    r.add_argument("--out", required=True, help="predictions .jsonl (appended; ids already there are skipped)")
    _add_common(r, "folder for one trace JSON per question")
    r.set_defaults(func=cmd_run)


# ----------------------------------------------------------------------------- shared


def _build(args):
    from misi_agent.agent.loop import DEFAULT_MAX_TURNS
    from misi_agent.agent.planners import make_planner
    from misi_agent.agent.store import StructureStore

    max_turns = DEFAULT_MAX_TURNS if args.max_turns is None else args.max_turns
    if max_turns < 1:
        raise MisiError("--max-turns must be at least 1")
    for name in ("min_pixels", "max_pixels", "max_new_tokens"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise MisiError(f"--{name.replace('_', '-')} must be positive")
    store = StructureStore(args.structures, allow_download=args.allow_download)
    planner = make_planner(args.planner, model=args.model, min_pixels=args.min_pixels, max_pixels=args.max_pixels,
                           max_new_tokens=args.max_new_tokens, trust_remote_code=args.trust_remote_code,
                           api_key_env=args.api_key_env, chat_template=args.chat_template, device=args.device,
                           dtype=args.dtype)
    return store, planner, max_turns


def _calls_summary(result) -> list[dict[str, Any]]:
    return [{"name": c["name"], "arguments": c["arguments"], "ok": c["ok"], "error": c["error"],
             "seconds": c["seconds"]} for c in result.tool_calls]


# ----------------------------------------------------------------------------- answer


def cmd_answer(args) -> int:
    from misi_agent.agent.loop import answer_question
    from misi_agent.bench.question import read_question

    qpath = Path(args.question)
    question = read_question(qpath, check_images=True)
    trace_path = Path(args.trace) if args.trace else None
    if trace_path is not None and not trace_path.parent.is_dir():
        raise MisiError(f"--trace {trace_path}: folder {trace_path.parent} does not exist")
    store, planner, max_turns = _build(args)
    try:
        result = answer_question(question, qpath.parent, planner, store, grounding=args.grounding, max_turns=max_turns)
    finally:
        planner.close()
    if trace_path is not None:
        result.trace.save(trace_path)
    if args.json:
        print(json.dumps({"id": question.id, "task": question.task, "answer": result.answer or None,
                          "error": result.error, "turns": result.trace.turns,
                          "planner": result.trace.planner, "grounding_used": result.trace.grounding_used,
                          "tool_calls": _calls_summary(result)}, ensure_ascii=False))
    elif result.answer:
        print(result.answer)
    if not result.answer:
        if not args.json:
            print(f"misi-agent: no answer: {result.error}", file=sys.stderr)
        return 1
    return 0


# ----------------------------------------------------------------------------- run


def read_done_ids(path: Path) -> set[str]:
    """Ids already in a predictions file. A last line cut short by a crash is cut off the file
    (and a final line without its newline gets one), so appending continues cleanly."""
    if not path.exists():
        return set()
    data = path.read_bytes()
    done: set[str] = set()
    keep = pos = 0
    n = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        line = data[pos:end]
        n += 1
        if line.strip():
            try:
                obj = json.loads(line.decode("utf-8"))
                if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
                    raise ValueError("no id")
            except (ValueError, UnicodeDecodeError):
                if data[end:].strip():
                    raise MisiError(f"{path.name}:{n}: not a prediction line (the file is damaged; use another --out)") \
                        from None
                break  # the interrupted last write
            done.add(obj["id"])
        keep = pos = end
    if keep < len(data):
        with open(path, "r+b") as fh:
            fh.truncate(keep)
    if keep and not data[:keep].endswith(b"\n"):
        with open(path, "ab") as fh:
            fh.write(b"\n")
    return done


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def cmd_run(args) -> int:
    from tqdm import tqdm

    from misi_agent.agent.loop import answer_question
    from misi_agent.bench.question import read_questions, validate_question

    qpath = Path(args.questions)
    out = Path(args.out)
    if not out.parent.is_dir():
        raise MisiError(f"--out {out}: folder {out.parent} does not exist")
    if out.exists() and out.is_dir():
        raise MisiError(f"--out {out} is a folder, not a file")
    trace_dir = Path(args.trace) if args.trace else None
    if trace_dir is not None and not trace_dir.is_dir():
        raise MisiError(f"--trace {trace_dir}: no such folder")
    questions = read_questions(qpath, validate=False)
    done = read_done_ids(out)
    todo = [q for q in questions if q.id not in done]
    store, planner, max_turns = _build(args)
    n_ok = n_err = 0
    t0 = time.perf_counter()
    try:
        with open(out, "a", encoding="utf-8") as fh, tqdm(total=len(todo), desc="answering", unit="q",
                                                          disable=False, file=sys.stderr) as bar:
            for q in todo:
                record: dict[str, Any] = {"id": q.id, "task": q.task}
                try:
                    validate_question(q, qpath.parent, check_images=True, where=f"question {q.id!r}")
                    result = answer_question(q, qpath.parent, planner, store, grounding=args.grounding,
                                             max_turns=max_turns)
                    record.update(prediction=result.answer or None, error=result.error,
                                  raw=result.trace.raw_answer, turns=result.trace.turns,
                                  tool_calls=[c["name"] for c in result.tool_calls],
                                  seconds=round(result.trace.seconds, 3))
                    if trace_dir is not None:
                        result.trace.save(trace_dir / f"{_SAFE.sub('_', q.id)}.json")
                except MisiError as exc:
                    record.update(prediction=None, error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                record["planner"] = planner.kind
                if record.get("prediction"):
                    n_ok += 1
                else:
                    n_err += 1
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
                bar.update(1)
    finally:
        planner.close()
    print(f"misi-agent run: {n_ok} answered, {n_err} without an answer, {len(questions) - len(todo)} already in "
          f"{out.name}; {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return 0
