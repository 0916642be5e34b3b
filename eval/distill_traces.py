"""Router traces as chat transcripts for fine-tuning a tool-calling planner; the shared run plumbing.

    python eval/distill_traces.py --config eval/configs/finetune_tiny.yaml [--out transcripts.jsonl]

The router (:class:`misi_agent.agent.planners.router.RouterPlanner`) answers every training
question by one deterministic tool call. Recorded as a chat (system prompt with the tool
specs, the question with its images, the assistant's ``<tool_call>``, the tool's result,
the final answer), its traces teach a model the same policy in the shipped tool template
(``misi_agent/agent/templates/qwen2_5_vl_tools.jinja``). Two choices make the policy
learnable by a small model (**ours**):

* every argument value is copied from the question text as written: the router lower-cases
  PDB IDs, the distilled calls spell them as the question does (``7VYJ``), so a model only
  has to copy characters, never transform them (:class:`TextSpellingRouter`);
* the final answer is the tool result's ``answer`` field, copied.

This module also holds what the ablation runner and the fine-tuning recipe share: question
sets generated on demand (:class:`SetSpec`, :func:`ensure_question_set`), a sqlite cache of
deterministic calls (:class:`CallCache`) and a registry that answers repeated tool calls
from it (:class:`CachedRegistry`).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO))

from misi_agent.agent.registry import Registry, Tool, ToolResult  # noqa: E402
from misi_agent.errors import MisiError  # noqa: E402

# ----------------------------------------------------------------------------- config helpers


class EvalError(MisiError):
    """Bad eval configuration or input (one-line message)."""


def load_yaml(path: str | Path) -> dict:
    """A YAML mapping from ``path`` (one-line errors)."""
    import yaml

    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalError(f"config not found: {p}") from None
    except yaml.YAMLError as exc:
        raise EvalError(f"{p}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise EvalError(f"{p}: expected a mapping at the top level")
    return data


def resolve(path: str | Path, base: Path = REPO) -> Path:
    """``path`` itself when absolute, else relative to ``base`` (the repository root)."""
    p = Path(os.path.expandvars(str(path))).expanduser()
    return p if p.is_absolute() else base / p


def write_text_atomic(path: Path, text: str) -> None:
    """Write through a temporary file in the same folder, then rename (no partial files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


# ----------------------------------------------------------------------------- question sets


@dataclass(frozen=True)
class SetSpec:
    """A generated question set: the arguments of ``misi-agent bench generate`` and its folder."""

    name: str
    out: Path
    structures: str
    split: str
    tasks: str = "all"
    per_task: int = 10
    renderer: str = "raster"
    size: int = 256
    seed: int = 0

    @classmethod
    def from_dict(cls, name: str, data: dict, default_out: Path) -> "SetSpec":
        known = set(cls.__dataclass_fields__) - {"name"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise EvalError(f"set {name!r}: unknown key(s) {', '.join(unknown)}")
        for key in ("structures", "split"):
            if key not in data:
                raise EvalError(f"set {name!r}: missing {key!r}")
        out = resolve(data["out"]) if data.get("out") else default_out
        structures = str(resolve(data["structures"]))
        tasks = data.get("tasks", "all")
        if isinstance(tasks, (list, tuple)):
            tasks = ",".join(tasks)
        return cls(name, out, structures, str(data["split"]), str(tasks), int(data.get("per_task", 10)),
                   str(data.get("renderer", "raster")), int(data.get("size", 256)), int(data.get("seed", 0)))

    @property
    def questions(self) -> Path:
        return self.out / "questions.jsonl"

    def command(self) -> str:
        """The equivalent CLI command (recorded with the results)."""
        return (f"misi-agent bench generate --structures {self.structures} --out {self.out} --tasks {self.tasks} "
                f"--per-task {self.per_task} --split {self.split} --renderer {self.renderer} --seed {self.seed} "
                f"--size {self.size}")


def ensure_question_set(spec: SetSpec, progress: bool = True) -> Path:
    """``questions.jsonl`` of the set, generating (or resuming) it first when it is missing."""
    if spec.questions.is_file():
        return spec.questions
    from misi_agent.bench.generate import generate, parse_tasks
    spec.out.parent.mkdir(parents=True, exist_ok=True)
    print(f"[eval] generating question set {spec.name}: {spec.command()}", file=sys.stderr)
    summary = generate(spec.structures, spec.out, tasks=parse_tasks(spec.tasks), per_task=spec.per_task,
                       split=spec.split, renderer=spec.renderer, seed=spec.seed, size=spec.size, progress=progress)
    if not spec.questions.is_file():
        raise EvalError(f"generation of {spec.name} did not finish ({summary.made} made); rerun to resume")
    return spec.questions


# ----------------------------------------------------------------------------- cache


def sha256_json(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")).hexdigest()


_FILE_HASHES: dict[tuple[str, int, int], str] = {}


def file_hash(path: str | Path) -> str:
    """SHA-256 of a file's bytes (memoised by path, size and mtime)."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FILE_HASHES:
        _FILE_HASHES[key] = hashlib.sha256(p.read_bytes()).hexdigest()
    return _FILE_HASHES[key]


def code_fingerprint() -> str:
    """A hash of the code and knowledge behind the tools: a change there misses the tool cache."""
    h = hashlib.sha256()
    roots = [REPO / "tools", REPO / "knowledge", REPO / "misi_agent" / "agent", REPO / "misi_agent" / "structure.py",
             REPO / "misi_agent" / "camera.py", REPO / "misi_agent" / "scene.py", REPO / "misi_agent" / "render"]
    files: list[Path] = []
    for r in roots:
        if r.is_file():
            files.append(r)
        elif r.is_dir():
            files += [f for f in r.rglob("*") if f.is_file() and f.suffix in (".py", ".yaml", ".csv", ".jinja")]
    for f in sorted(files):
        h.update(str(f.relative_to(REPO)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def weights_fingerprint(folder: str | Path) -> str:
    """Identity of a checkpoint folder: config, and each safetensors file's size and first/last MiB."""
    folder = Path(folder)
    h = hashlib.sha256()
    for name in ("config.json", "tokenizer.json", "preprocessor_config.json"):
        if (folder / name).is_file():
            h.update((folder / name).read_bytes())
    for f in sorted(folder.glob("*.safetensors")):
        size = f.stat().st_size
        h.update(f"{f.name}:{size}".encode())
        with open(f, "rb") as fh:
            h.update(fh.read(1 << 20))
            if size > 1 << 20:
                fh.seek(max(size - (1 << 20), 0))
                h.update(fh.read(1 << 20))
    return h.hexdigest()[:16]


class CallCache:
    """Deterministic call results in one sqlite file, keyed by a hash of everything that decides them.

    Two kinds of entries: ``planner`` steps (model fingerprint, pixel limits, decoding,
    the rendered conversation with image hashes, the tool specs, the task) and ``tool``
    calls (tool, criterion, grounding, arguments, the question's image hashes, the structure
    folders, the code fingerprint). Values are JSON. ``hits``/``misses`` count lookups.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(self.path))
        self.db.execute("CREATE TABLE IF NOT EXISTS cache (key TEXT PRIMARY KEY, kind TEXT, value TEXT, created REAL)")
        self.db.commit()
        self.hits: dict[str, int] = {}
        self.misses: dict[str, int] = {}

    def get(self, kind: str, key: str) -> Any | None:
        row = self.db.execute("SELECT value FROM cache WHERE key = ?", (key,)).fetchone()
        bucket = self.hits if row else self.misses
        bucket[kind] = bucket.get(kind, 0) + 1
        return json.loads(row[0]) if row else None

    def put(self, kind: str, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO cache VALUES (?, ?, ?, ?)",
                        (key, kind, json.dumps(value, ensure_ascii=False, default=str), time.time()))
        self.db.commit()

    def count(self, kind: str | None = None) -> int:
        if kind is None:
            return int(self.db.execute("SELECT COUNT(*) FROM cache").fetchone()[0])
        return int(self.db.execute("SELECT COUNT(*) FROM cache WHERE kind = ?", (kind,)).fetchone()[0])

    def stats(self) -> dict[str, Any]:
        return {"hits": dict(self.hits), "misses": dict(self.misses), "entries": self.count()}

    def close(self) -> None:
        self.db.close()


class CachedRegistry(Registry):
    """The tools of ``base``, with successful and failing calls answered from ``cache`` when seen before.

    ``scope`` holds what else decides a result (criterion, grounding, image hashes,
    structure folders, code fingerprint). Calls the registry rejects before running
    (unknown tool, invalid arguments) are not cached.
    """

    def __init__(self, base: Registry, cache: CallCache | None, scope: dict[str, Any]):
        super().__init__([base.get(n) for n in base.names()])
        self.cache = cache
        self.scope = scope

    def call(self, name: str, arguments: Any) -> ToolResult:
        if self.cache is None or name not in self or not isinstance(arguments, dict) \
                or self.get(name).validate(arguments) is not None:
            return super().call(name, arguments)
        key = sha256_json(["tool", name, arguments, self.scope])
        hit = self.cache.get("tool", key)
        if hit is not None:
            return ToolResult(name, arguments, hit["ok"], hit.get("output"), hit.get("error"), 0.0)
        result = super().call(name, arguments)
        self.cache.put("tool", key, {"ok": result.ok, "output": result.output, "error": result.error,
                                     "seconds": result.seconds})
        return result


def tool_scope(images: Iterable[str | Path], store, grounding: str, criterion: str, fingerprint: str) -> dict[str, Any]:
    """What besides name and arguments decides a tool call of one question."""
    return {"images": [file_hash(p) for p in images], "structures": store.describe()["folders"],
            "grounding": grounding, "hbonds": criterion, "code": fingerprint}


# ----------------------------------------------------------------------------- the distilled policy


def text_spelling(value: str, text: str) -> str:
    """``value`` as the question text writes it (case-insensitive match of a whole word), else unchanged."""
    m = re.search(r"(?<![A-Za-z0-9])" + re.escape(value) + r"(?![A-Za-z0-9])", text, flags=re.IGNORECASE)
    return m.group(0) if m else value


def respell_arguments(args: dict[str, Any], text: str) -> dict[str, Any]:
    """PDB IDs in a call's arguments spelled as in the question text (the router lower-cases them)."""
    out = dict(args)
    for key in ("pdb_id", "target_pdb_id"):
        if isinstance(out.get(key), str):
            out[key] = text_spelling(out[key], text)
    return out


def make_text_spelling_router():
    """The router, with every call's PDB IDs spelled as in the question (see the module doc)."""
    from misi_agent.agent.parsing import ToolCall
    from misi_agent.agent.planners.base import PlannerReply, user_text
    from misi_agent.agent.planners.router import RouterPlanner

    class TextSpellingRouter(RouterPlanner):
        kind = "router"

        def describe(self) -> dict[str, Any]:
            return {"planner": self.kind, "model": None, "spelling": "as in the question text"}

        def step(self, inp):
            reply = super().step(inp)
            if not reply.tool_calls:
                return reply
            text = user_text(inp.messages)
            calls = []
            for c in reply.tool_calls:
                args = respell_arguments(c.arguments or {}, text)
                calls.append(ToolCall(c.id, c.name, args, c.error, json.dumps({"name": c.name, "arguments": args})))
            return PlannerReply(text=reply.text, tool_calls=tuple(calls), raw=calls[0].raw if calls else reply.raw,
                                info=reply.info)

    return TextSpellingRouter()


@dataclass
class Transcript:
    """One training conversation (OpenAI chat shape, images as absolute paths) and where it came from."""

    id: str
    task: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    complete: bool
    answer: str
    gold: str
    composite: float | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def direct_transcript(q, base: Path) -> Transcript:
    """The paper's SFT sample: system prompt, the question with its images, the gold answer."""
    from misi_agent.agent.loop import build_messages

    msgs = build_messages(q.question, [str(p.resolve()) for p in q.image_paths(base)])
    msgs.append({"role": "assistant", "content": q.answer})
    return Transcript(q.id, q.task, msgs, [], True, q.answer, q.answer, 1.0)


def router_transcript(q, base: Path, store, cache: CallCache | None, fingerprint: str, *,
                      max_turns: int = 4) -> Transcript:
    """The router's trace of one question as a chat; ``complete`` when it reached a final answer.

    A router whose tool failed still shows the policy's call (the tool and its arguments):
    the transcript then ends after the call (``complete=False``) and only the call is trained.
    """
    from misi_agent.agent.context import AgentContext
    from misi_agent.agent.loop import normalise_answer, run_agent
    from misi_agent.agent.toolset import build_registry
    from misi_agent.bench.scoring import score_item

    images = [p.resolve() for p in q.image_paths(base)]
    context = AgentContext(images=images, store=store, grounding="structure")
    base_reg = build_registry(context)
    registry = CachedRegistry(base_reg, cache, tool_scope(images, store, "structure", "chimerax", fingerprint))
    result = run_agent(question_id=q.id, task=q.task, text=q.question, images=images,
                       planner=make_text_spelling_router(), registry=registry,
                       normalise=lambda t: normalise_answer(q, t), max_turns=max_turns)
    msgs = [dict(m) for m in result.trace.messages]
    complete = bool(result.answer)
    if complete:
        msgs.append({"role": "assistant", "content": result.answer})
    else:  # keep the system prompt, the question and the call; drop the failed result
        cut = next((i for i, m in enumerate(msgs) if m.get("role") == "assistant" and m.get("tool_calls")), None)
        msgs = msgs[: cut + 1] if cut is not None else msgs
    composite = score_item(q, result.answer or None).composite if complete else None
    return Transcript(q.id, q.task, msgs, registry.specs(), complete, result.answer, q.answer, composite,
                      result.error)


def distill(questions: Path, out: Path, store, cache: CallCache | None = None, *, flavour: str = "tools",
            progress: bool = True) -> dict[str, Any]:
    """Write one transcript per question of ``questions`` to ``out`` (JSONL, atomically); return counts."""
    from tqdm import tqdm

    from misi_agent.bench.question import read_questions

    qs = read_questions(questions, validate=False)
    fp = code_fingerprint()
    rows, counts = [], {"questions": len(qs), "complete": 0, "call_only": 0, "skipped": 0, "correct": 0}
    by_task: dict[str, dict[str, int]] = {}
    for q in tqdm(qs, desc=f"distil {flavour}", unit="q", disable=not progress, file=sys.stderr):
        if flavour == "direct":
            t = direct_transcript(q, questions.parent)
        else:
            t = router_transcript(q, questions.parent, store, cache, fp)
        has_call = any(m.get("role") == "assistant" and m.get("tool_calls") for m in t.messages)
        stats = by_task.setdefault(q.task, {"complete": 0, "call_only": 0, "skipped": 0})
        if t.complete:
            counts["complete"] += 1
            stats["complete"] += 1
            counts["correct"] += int((t.composite or 0.0) >= 0.999)
        elif has_call:
            counts["call_only"] += 1
            stats["call_only"] += 1
        else:
            counts["skipped"] += 1
            stats["skipped"] += 1
            continue
        rows.append(json.dumps(t.to_dict(), ensure_ascii=False))
    write_text_atomic(out, "".join(r + "\n" for r in rows))
    counts["by_task"] = by_task
    return counts


def read_transcripts(path: Path) -> list[dict[str, Any]]:
    """The transcripts of a JSONL file written by :func:`distill`."""
    if not path.is_file():
        raise EvalError(f"transcripts not found: {path}")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="fine-tuning config (its train_set and structures are used)")
    ap.add_argument("--flavour", choices=("tools", "direct"), default="tools")
    ap.add_argument("--out", default=None, help="transcripts JSONL (default: the config's work folder)")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    try:
        from misi_agent.agent.store import StructureStore

        cfg = load_yaml(args.config)
        work = resolve(cfg.get("work_dir", "eval/work"))
        spec = SetSpec.from_dict("train", cfg["train_set"], work / "sets" / "train")
        qpath = ensure_question_set(spec, progress=not args.no_progress)
        store = StructureStore([resolve(s) for s in cfg.get("structures", [])], use_env=False)
        out = Path(args.out) if args.out else work / f"transcripts-{args.flavour}.jsonl"
        cache = CallCache(work / "cache.sqlite")
        counts = distill(qpath, out, store, cache, flavour=args.flavour, progress=not args.no_progress)
        print(json.dumps({"out": str(out), **counts}, indent=2))
    except MisiError as exc:
        print(f"distill_traces: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
