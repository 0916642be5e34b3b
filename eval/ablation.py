"""Ablations over the full benchmark: which part of the agent earns which score.

    python eval/ablation.py --config eval/configs/tiny.yaml

One YAML config names the question sets (generated when missing), the models (trained
with eval/finetune.py when missing) and the arms. Arm kinds:

* ``vlm``: a local model through the ``transformers:PATH`` planner. ``tools: false`` is the
  pure VLM (images and prompt only, no tool section, no tools); ``tools: true`` the VLM
  planner with function calling over the agent's registry.
* ``router``: the symbolic pipeline alone (deterministic programs of tool calls). Options
  ``hbonds: chimerax | distance | plip`` (the knowledge ablation: the two H-bond tools
  computed by another criterion, :mod:`misi_agent.agent.knowledge_variants`) and
  ``grounding: structure | images | auto``.
* ``oracle``: a model given oracle tool outputs. The task's tool call (the call the router
  makes, arguments as the question spells them) and its result computed from the truth
  are inserted as the conversation's first assistant and tool turns; the model writes the
  rest. Oracle results: for the H-bond tasks, the H-bond engine on the true complex (the
  ligand copy the generator used); for the geometric tasks, the true answer from the item's
  generation record. It separates perception (the tools' reading of the images) from
  reasoning (the model's use of a tool result).

Every arm writes ``<results>/<set>/<arm>/predictions.jsonl``: one line per question,
appended and synced as soon as it is answered (a rerun skips ids already there). Model
steps and tool calls are cached in ``<results>/cache.sqlite`` keyed by everything that
decides them (model weights fingerprint, pixel limits, decoding, the conversation with
image hashes, the tool specs, the task; for tools the arguments, images, structure
folders, H-bond criterion, grounding and a fingerprint of the tool code), so a rerun, or
another arm making the same call, costs nothing.

Scoring is :mod:`misi_agent.bench.scoring`: per set one table with the ten columns, both
averages, composite and exact match, the paper's Human and Qwen2.5VL-7B-SFT rows beside
ours (:mod:`misi_agent.bench.report`), bootstrap confidence intervals, paired differences
between arms, tool-call validity and turns of the planner arms, and a bar chart.
An arm whose grounding is not available reports "not available" and the run goes on.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from distill_traces import (REPO, CachedRegistry, CallCache, EvalError, SetSpec, code_fingerprint,  # noqa: E402
                            ensure_question_set, load_yaml, make_text_spelling_router, resolve, respell_arguments,
                            sha256_json, file_hash, tool_scope, weights_fingerprint, write_text_atomic)

from misi_agent.agent.parsing import ToolCall  # noqa: E402
from misi_agent.agent.planners.base import Planner, PlannerInput, PlannerReply  # noqa: E402
from misi_agent.agent.registry import Registry, Tool  # noqa: E402
from misi_agent.bench import tasks as T  # noqa: E402
from misi_agent.errors import MisiError  # noqa: E402

ARM_KINDS = ("vlm", "router", "oracle")
HBOND_TOOLS = ("residue_hbonds", "pocket_hbonds")
NOT_AVAILABLE_MARK = "not available"
DEFAULT_BOOTSTRAP = 2000

# ----------------------------------------------------------------------------- config


@dataclass(frozen=True)
class ModelSpec:
    """A local checkpoint for the ``vlm``/``oracle`` arms, trained by eval/finetune.py when missing."""

    name: str
    path: Path
    train_config: Path | None = None
    flavour: str | None = None
    min_pixels: int | None = None
    max_pixels: int | None = None
    max_new_tokens: int = 160
    device: str = "cpu"
    dtype: str = "auto"

    def pixel_limits(self) -> tuple[int | None, int | None]:
        """The configured limits, else the ones the checkpoint was trained with (its image processor)."""
        lo, hi = self.min_pixels, self.max_pixels
        pp = self.path / "preprocessor_config.json"
        if (lo is None or hi is None) and pp.is_file():
            data = json.loads(pp.read_text())
            size = data.get("size") or {}
            lo = lo if lo is not None else data.get("min_pixels", size.get("shortest_edge"))
            hi = hi if hi is not None else data.get("max_pixels", size.get("longest_edge"))
        return lo, hi


@dataclass(frozen=True)
class ArmSpec:
    """One row of the table: how questions are answered."""

    name: str
    kind: str
    label: str
    description: str = ""
    model: str | None = None
    tools: bool = True
    hbonds: str = "chimerax"
    grounding: str = "structure"
    tasks: tuple[str, ...] | None = None
    sets: tuple[str, ...] | None = None
    max_turns: int = 4


@dataclass
class AblationConfig:
    name: str
    seed: int
    results_dir: Path
    structures: list[Path]
    sets: dict[str, SetSpec]
    models: dict[str, ModelSpec]
    arms: list[ArmSpec]
    bootstrap: int = DEFAULT_BOOTSTRAP
    cache: Path | None = None
    source: str = ""
    raw: dict = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> "AblationConfig":
        return cls.from_dict(load_yaml(path), source=str(path))

    @classmethod
    def from_dict(cls, raw: dict, source: str = "") -> "AblationConfig":
        from misi_agent.agent.context import GROUNDINGS
        from misi_agent.agent.knowledge_variants import CRITERIA

        known = {"name", "seed", "results_dir", "work_dir", "structures", "sets", "models", "arms", "bootstrap",
                 "cache", "planner_defaults"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise EvalError(f"{source}: unknown key(s) {', '.join(unknown)}")
        name = str(raw.get("name", "ablation"))
        work = resolve(raw.get("work_dir", f"eval/work/{name}"))
        results = resolve(raw.get("results_dir", f"eval/results/ablation/{name}"))
        sets = {}
        for sname, sd in (raw.get("sets") or {}).items():
            sets[sname] = SetSpec.from_dict(sname, dict(sd or {}), work / "sets" / sname)
        if not sets:
            raise EvalError(f"{source}: no question sets ('sets')")
        defaults = dict(raw.get("planner_defaults") or {})
        models = {}
        for mname, md in (raw.get("models") or {}).items():
            md = {**defaults, **dict(md or {})}
            train = md.pop("train", None) or {}
            if "path" not in md:
                raise EvalError(f"{source}: model {mname!r} needs a 'path'")
            allowed = {"path", "min_pixels", "max_pixels", "max_new_tokens", "device", "dtype"}
            extra = sorted(set(md) - allowed)
            if extra:
                raise EvalError(f"{source}: model {mname!r}: unknown key(s) {', '.join(extra)}")
            models[mname] = ModelSpec(mname, resolve(md["path"]),
                                      resolve(train["config"]) if train.get("config") else None,
                                      train.get("flavour"), md.get("min_pixels"), md.get("max_pixels"),
                                      int(md.get("max_new_tokens", 160)), str(md.get("device", "cpu")),
                                      str(md.get("dtype", "auto")))
        arms = []
        for ad in raw.get("arms") or []:
            ad = dict(ad)
            aname = ad.get("name")
            if not aname:
                raise EvalError(f"{source}: every arm needs a 'name'")
            kind = ad.get("kind")
            if kind not in ARM_KINDS:
                raise EvalError(f"{source}: arm {aname!r}: kind must be one of {', '.join(ARM_KINDS)}")
            if kind in ("vlm", "oracle") and ad.get("model") not in models:
                raise EvalError(f"{source}: arm {aname!r} needs a 'model' from 'models'")
            if ad.get("hbonds", "chimerax") not in CRITERIA:
                raise EvalError(f"{source}: arm {aname!r}: hbonds must be one of {', '.join(CRITERIA)}")
            if ad.get("grounding", "structure") not in GROUNDINGS:
                raise EvalError(f"{source}: arm {aname!r}: grounding must be one of {', '.join(GROUNDINGS)}")
            tasks = ad.get("tasks")
            if tasks is not None:
                tasks = tuple(tasks)
                bad = [t for t in tasks if t not in T.TASKS]
                if bad:
                    raise EvalError(f"{source}: arm {aname!r}: unknown task(s) {', '.join(bad)}")
            arm_sets = tuple(ad["sets"]) if ad.get("sets") else None
            if arm_sets and any(s not in sets for s in arm_sets):
                raise EvalError(f"{source}: arm {aname!r}: unknown set(s) in {list(arm_sets)}")
            allowed = {"name", "kind", "label", "description", "model", "tools", "hbonds", "grounding", "tasks", "sets",
                       "max_turns"}
            extra = sorted(set(ad) - allowed)
            if extra:
                raise EvalError(f"{source}: arm {aname!r}: unknown key(s) {', '.join(extra)}")
            arms.append(ArmSpec(aname, kind, str(ad.get("label", aname)), str(ad.get("description", "")),
                                ad.get("model"), bool(ad.get("tools", True)), str(ad.get("hbonds", "chimerax")),
                                str(ad.get("grounding", "structure")), tasks, arm_sets, int(ad.get("max_turns", 4))))
        if len({a.name for a in arms}) != len(arms):
            raise EvalError(f"{source}: arm names must be unique")
        cache = raw.get("cache", str(results / "cache.sqlite"))
        return cls(name, int(raw.get("seed", 0)), results, [resolve(s) for s in raw.get("structures", [])], sets,
                   models, arms, int(raw.get("bootstrap", DEFAULT_BOOTSTRAP)), resolve(cache) if cache else None,
                   source, raw)


# ----------------------------------------------------------------------------- planners


def message_key(messages: list[dict[str, Any]]) -> list[Any]:
    """The conversation with every image path replaced by the hash of its bytes."""
    out = []
    for m in messages:
        m = dict(m)
        if isinstance(m.get("content"), list):
            m["content"] = [{"type": "image", "sha256": file_hash(p["path"])} if p.get("type") == "image" else p
                            for p in m["content"]]
        out.append(m)
    return out


class CachingPlanner(Planner):
    """A planner whose steps are answered from the cache when seen before; the model loads on the first miss."""

    def __init__(self, factory: Callable[[], Planner], identity: dict[str, Any], cache: CallCache | None):
        self.factory = factory
        self.identity = identity
        self.cache = cache
        self.kind = identity.get("planner", "planner")
        self._inner: Planner | None = None
        self.steps = self.hits = 0

    def describe(self) -> dict[str, Any]:
        return dict(self.identity)

    def step(self, inp: PlannerInput) -> PlannerReply:
        self.steps += 1
        key = sha256_json(["planner", self.identity, inp.task, message_key(inp.messages), inp.tools])
        hit = self.cache.get("planner", key) if self.cache is not None else None
        if hit is not None:
            self.hits += 1
            calls = tuple(ToolCall(**c) for c in hit["tool_calls"])
            return PlannerReply(text=hit["text"], tool_calls=calls, raw=hit["raw"], info={**hit["info"], "cached": True})
        if self._inner is None:
            self._inner = self.factory()
        reply = self._inner.step(inp)
        if self.cache is not None:
            self.cache.put("planner", key, {"text": reply.text, "raw": reply.raw, "info": reply.info,
                                            "tool_calls": [c.to_dict() for c in reply.tool_calls]})
        return reply

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()
            self._inner = None


def model_identity(m: ModelSpec) -> dict[str, Any]:
    lo, hi = m.pixel_limits()
    return {"planner": "transformers", "model": m.name, "weights": weights_fingerprint(m.path), "min_pixels": lo,
            "max_pixels": hi, "max_new_tokens": m.max_new_tokens, "decoding": "greedy", "seed": 0, "device": m.device,
            "dtype": m.dtype}


def model_planner(m: ModelSpec, cache: CallCache | None) -> CachingPlanner:
    from misi_agent.agent.planners import make_planner

    lo, hi = m.pixel_limits()

    def factory() -> Planner:
        return make_planner(f"transformers:{m.path}", model=m.name, min_pixels=lo, max_pixels=hi,
                            max_new_tokens=m.max_new_tokens, device=m.device, dtype=m.dtype)

    return CachingPlanner(factory, model_identity(m), cache)


class InsertedCallPlanner(Planner):
    """First step: the given tool call (inserted, not generated); later steps: the wrapped planner."""

    def __init__(self, inner: Planner, call: ToolCall):
        self.inner = inner
        self.call = call
        self.kind = f"oracle+{inner.kind}"

    def describe(self) -> dict[str, Any]:
        return {**self.inner.describe(), "inserted_call": {"name": self.call.name, "arguments": self.call.arguments}}

    def step(self, inp: PlannerInput) -> PlannerReply:
        if not any(m.get("role") == "assistant" for m in inp.messages):
            return PlannerReply(text="", tool_calls=(self.call,), raw=self.call.raw, info={"inserted": "oracle"})
        return self.inner.step(inp)


# ----------------------------------------------------------------------------- oracle outputs


def expected_call(q) -> tuple[str, dict[str, Any]] | None:
    """The router's call for ``q`` (from its text), PDB IDs spelled as in the text; None when unreadable."""
    from misi_agent.agent.details import read_details
    from misi_agent.agent.planners.router import first_call

    try:
        name, args = first_call(q.task, read_details(q.question), T.task_info(q.task).n_images)
    except MisiError:
        return None
    return name, respell_arguments(args, q.question)


def true_complex(q, store):
    """The complex the item was made from: its source file and ligand code, as the generator loaded it."""
    from misi_agent.structure import load_complex

    meta = q.meta or {}
    src = Path(str(meta.get("source", "")))
    if not src.is_file():
        src = store.find(meta["pdb_id"]).path
    return load_complex(src, meta.get("ligand"), pdb_id=meta.get("pdb_id"))


def _oracle_context(images: list[Path], store, cx):
    """An agent context whose every structure lookup returns the item's true complex."""
    from misi_agent.agent.context import AgentContext, LigandCandidate, LigandChoice

    cand = LigandCandidate(cx.ligand_key, int(cx.ligand.array_length()), tuple(str(n) for n in cx.ligand.atom_name))
    choice = LigandChoice(cand, "oracle: the ligand copy the item was made from", (cand,))

    class OracleContext(AgentContext):
        def complex(self, pdb_id, **kwargs):
            return cx, choice

    return OracleContext(images=images, store=store, grounding="structure")


def oracle_output(q, store, images: list[Path], call: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """The result of the task's tool computed from the truth, in that tool's own output format.

    H-bond tasks: the agent's own chemistry tool run on the true complex (the ligand copy
    the generator used). Geometric tasks: a spatial-tool answer record (the real tools'
    format) holding the true operation from the item's generation record.
    """
    params = (q.meta or {}).get("params") or {}
    if q.task in (T.RESIDUE_LIGAND, T.POCKET_LIGAND):
        from misi_agent.agent.toolset import build_registry

        cx = true_complex(q, store)
        res = build_registry(_oracle_context(images, store, cx)).call(call[0], call[1])
        if not res.ok:
            raise EvalError(f"oracle {call[0]} failed on {q.id}: {res.error}")
        return res.output
    note = "oracle: the true operation recorded when the item was made"
    try:
        from misi_agent.tools.spatial_records import SpatialAnswer

        out = SpatialAnswer(task=q.task, answer=q.answer, score=0.0, runner_up=None, runner_up_score=None, margin=None,
                            residual=0.0, confident=True, notes=(note,),
                            details={"commands": params.get("commands")}).to_dict()
    except ImportError:
        out = {"task": q.task, "answer": q.answer, "notes": [note], "details": {"commands": params.get("commands")}}
    meta = q.meta or {}
    out["ligand"] = {"code": meta.get("ligand"), "chosen_because": "oracle: the item's ligand"}
    return out


# ----------------------------------------------------------------------------- answering


@dataclass
class ArmRunner:
    """Answers questions for one arm: planner, registry per question, validity bookkeeping."""

    arm: ArmSpec
    cfg: AblationConfig
    store: Any
    cache: CallCache | None
    fingerprint: str
    planner: Planner | None = None

    def open(self) -> None:
        if self.arm.kind in ("vlm", "oracle"):
            self.planner = model_planner(self.cfg.models[self.arm.model], self.cache)
        else:
            from misi_agent.agent.planners.router import RouterPlanner

            self.planner = RouterPlanner()

    def close(self) -> None:
        if self.planner is not None:
            self.planner.close()

    def registry(self, q, images: list[Path]) -> Registry:
        from misi_agent.agent.context import AgentContext
        from misi_agent.agent.knowledge_variants import build_variant_registry
        from misi_agent.agent.toolset import build_registry

        if self.arm.kind == "vlm" and not self.arm.tools:
            return Registry()
        context = AgentContext(images=images, store=self.store, grounding=self.arm.grounding)
        # chimerax is the default tools' own engine; the other criteria replace the two H-bond tools
        base = build_registry(context) if self.arm.hbonds == "chimerax" else build_variant_registry(context, self.arm.hbonds)
        reg = ScopedCachedRegistry(base, self.cache, tool_scope(images, self.store, self.arm.grounding, "chimerax",
                                                                self.fingerprint), self.arm.hbonds)
        if self.arm.kind == "oracle":
            call = expected_call(q)
            if call is not None and call[0] in reg:
                result = oracle_output(q, self.store, images, call)
                tool = reg.get(call[0])
                replaced = Registry()
                for n in reg.names():
                    if n == call[0]:
                        replaced.register(Tool(tool.name, tool.description, tool.parameters, tool.output,
                                               lambda _r=result, **kw: _r))
                    else:
                        replaced.register(reg.get(n))
                return replaced
        return reg

    def answer(self, q, base: Path) -> dict[str, Any]:
        from misi_agent.agent.loop import normalise_answer, run_agent

        images = [p.resolve() for p in q.image_paths(base)]
        registry = self.registry(q, images)
        planner = self.planner
        inserted = False
        if self.arm.kind == "oracle":
            call = expected_call(q)
            if call is not None and call[0] in registry:
                planner = InsertedCallPlanner(self.planner, ToolCall("call_oracle", call[0], call[1], None,
                                                                     json.dumps({"name": call[0], "arguments": call[1]})))
                inserted = True
        hits0 = getattr(self.planner, "hits", 0)
        result = run_agent(question_id=q.id, task=q.task, text=q.question, images=images, planner=planner,
                           registry=registry, normalise=lambda t: normalise_answer(q, t),
                           max_turns=self.arm.max_turns + int(inserted), grounding=self.arm.grounding)
        rec = item_record(q, result.trace, registry, inserted, self.arm.kind)
        rec["cached_steps"] = getattr(self.planner, "hits", 0) - hits0
        return rec


class ScopedCachedRegistry(CachedRegistry):
    """A cached registry whose H-bond tools also key on the H-bond criterion (other tools share entries)."""

    def __init__(self, base: Registry, cache: CallCache | None, scope: dict[str, Any], criterion: str):
        super().__init__(base, cache, scope)
        self.criterion = criterion

    def call(self, name, arguments):
        scope = self.scope
        self.scope = {**scope, "hbonds": self.criterion if name in HBOND_TOOLS else None}
        try:
            return super().call(name, arguments)
        finally:
            self.scope = scope


def classify_call(call: dict[str, Any], registry: Registry) -> str | None:
    """None for a valid call (parsed, a listed tool, arguments pass its schema), else the reason."""
    if call.get("error"):
        return "unparseable"
    name = call.get("name")
    if not name or name not in registry:
        return "unknown tool"
    problem = registry.get(name).validate(call.get("arguments"))
    return "invalid arguments" if problem else None


def _same_call(a: tuple[str, dict] | None, b: tuple[str, dict] | None) -> bool:
    if a is None or b is None:
        return False

    def norm(args: dict) -> dict:
        return {k: (v.lower() if k in ("pdb_id", "target_pdb_id") and isinstance(v, str) else v) for k, v in args.items()}

    return a[0] == b[0] and norm(a[1] or {}) == norm(b[1] or {})


def item_record(q, trace, registry: Registry, inserted: bool, kind: str) -> dict[str, Any]:
    """The predictions line of one answered question: answer, error, turns, the model's calls and their validity."""
    steps = trace.steps[1:] if inserted else trace.steps
    calls = []
    for s in steps:
        for c in s.tool_calls:
            reason = classify_call(c, registry)
            calls.append({"name": c.get("name"), "arguments": c.get("arguments"), "valid": reason is None,
                          "invalid": reason})
    results = [r for s in steps for r in s.results]
    for c, r in zip(calls, results):
        c["ok"] = bool(r.get("ok"))
        if not r.get("ok"):
            c["error"] = r.get("error")
    expected = expected_call(q)
    first = (calls[0]["name"], calls[0]["arguments"]) if calls else None
    return {
        "id": q.id, "task": q.task, "prediction": trace.answer or None, "error": trace.error,
        "raw": trace.raw_answer, "first_raw": steps[0].raw[:400] if steps else None, "turns": len(steps),
        "inserted_oracle_call": inserted,
        "tool_calls": calls, "n_calls": len(calls), "all_calls_valid": bool(calls) and all(c["valid"] for c in calls),
        "first_call_as_router": _same_call(first, expected) if kind != "router" else None,
        "seconds": round(trace.seconds, 3),
    }


# ----------------------------------------------------------------------------- running


def arm_questions(arm: ArmSpec, qs: list) -> list:
    return [q for q in qs if arm.tasks is None or q.task in arm.tasks]


def ensure_model(m: ModelSpec, progress: bool) -> None:
    """Train the model with eval/finetune.py when its folder is missing."""
    if (m.path / "config.json").is_file() and any(m.path.glob("*.safetensors")):
        return
    if m.train_config is None or m.flavour is None:
        raise EvalError(f"model {m.name}: {m.path} is not a checkpoint and no 'train' recipe is configured")
    from finetune import FinetuneConfig, finetune

    print(f"[ablation] training model {m.name} ({m.flavour}) with {m.train_config}", file=sys.stderr)
    finetune(FinetuneConfig.load(m.train_config), m.flavour, progress=progress, out=m.path)


def probe_available(runner: ArmRunner, q, base: Path) -> str | None:
    """None when the arm can answer; else why not (an arm whose grounding is not implemented yet)."""
    if runner.arm.grounding == "structure":
        return None
    rec = runner.answer(q, base)
    errors = [rec.get("error") or ""] + [c.get("error") or "" for c in rec["tool_calls"]]
    hit = next((e for e in errors if NOT_AVAILABLE_MARK in e.lower()), None)
    return hit


def run_arm(runner: ArmRunner, set_name: str, qpath: Path, qs: list, out_dir: Path, progress: bool,
            max_items: int | None = None) -> dict[str, Any]:
    """Answer the arm's questions of one set, appending to its predictions file; return its status."""
    from tqdm import tqdm

    from misi_agent.agent.cli import read_done_ids

    arm = runner.arm
    out_dir.mkdir(parents=True, exist_ok=True)
    pred_path = out_dir / "predictions.jsonl"
    mine = arm_questions(arm, qs)
    if max_items is not None:
        mine = mine[:max_items]
    status_path = out_dir / "status.json"
    if not mine:
        return {"status": "no items"}
    why = probe_available(runner, mine[0], qpath.parent)
    if why is not None:
        status = {"status": NOT_AVAILABLE_MARK, "reason": why}
        write_text_atomic(status_path, json.dumps(status, indent=2) + "\n")
        if pred_path.exists():
            pred_path.unlink()
        print(f"[ablation] {set_name}/{arm.name}: {NOT_AVAILABLE_MARK}: {why}", file=sys.stderr)
        return status
    done = read_done_ids(pred_path)
    todo = [q for q in mine if q.id not in done]
    t0 = time.perf_counter()
    with open(pred_path, "a", encoding="utf-8") as fh, tqdm(total=len(todo), desc=f"{set_name}/{arm.name}", unit="q",
                                                           disable=not progress, file=sys.stderr) as bar:
        for q in todo:
            try:
                rec = runner.answer(q, qpath.parent)
            except MisiError as exc:
                rec = {"id": q.id, "task": q.task, "prediction": None, "error": str(exc).splitlines()[0],
                       "turns": 0, "tool_calls": [], "n_calls": 0, "all_calls_valid": False}
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
            bar.update(1)
    status = {"status": "ok", "items": len(mine), "answered_now": len(todo), "seconds_now": round(time.perf_counter() - t0, 1)}
    write_text_atomic(status_path, json.dumps(status, indent=2) + "\n")
    return status


def read_records(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out[rec["id"]] = rec
    return out


# ----------------------------------------------------------------------------- statistics


def bootstrap_ci(columns: dict[str, list[float]], stat: Callable[[dict[str, list[float]]], float | None], n: int,
                 seed: int, alpha: float = 0.05) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI of ``stat`` over items resampled with replacement within each column."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cols = {c: np.asarray(v, dtype=float) for c, v in columns.items() if len(v)}
    if not cols:
        return None, None
    vals = []
    for _ in range(n):
        sample = {c: list(v[rng.integers(0, len(v), len(v))]) for c, v in cols.items()}
        s = stat(sample)
        if s is not None:
            vals.append(s)
    if not vals:
        return None, None
    lo, hi = np.quantile(vals, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float | None, float | None]:
    """Wilson score interval of a binomial proportion k/n, in %."""
    if n == 0:
        return None, None
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return 100 * max(0.0, c - h), 100 * min(1.0, c + h)


def _avg_stat(which: tuple[str, ...]) -> Callable[[dict[str, list[float]]], float | None]:
    def stat(cols: dict[str, list[float]]) -> float | None:
        means = [100 * sum(v) / len(v) for c, v in cols.items() if c in which and len(v)]
        return sum(means) / len(means) if means else None

    return stat


def paired_difference(a: dict[str, dict[str, float]], b: dict[str, dict[str, float]], columns: tuple[str, ...],
                      n: int, seed: int) -> dict[str, Any] | None:
    """Mean over ``columns`` of A minus B (composite ×100) on the items both scored, with a paired bootstrap CI."""
    import numpy as np

    common = {c: sorted(set(a.get(c, {})) & set(b.get(c, {}))) for c in columns}
    common = {c: ids for c, ids in common.items() if ids}
    if not common:
        return None
    diffs = {c: np.array([a[c][i] - b[c][i] for i in ids]) for c, ids in common.items()}
    point = float(np.mean([100 * d.mean() for d in diffs.values()]))
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n):
        boots.append(np.mean([100 * d[rng.integers(0, len(d), len(d))].mean() for d in diffs.values()]))
    lo, hi = np.quantile(boots, [0.025, 0.975])
    every = np.concatenate(list(diffs.values()))
    wins, losses = int((every > 1e-9).sum()), int((every < -1e-9).sum())
    p_sign = sign_test(wins, losses)
    return {"difference": round(point, 2), "ci95": [round(float(lo), 2), round(float(hi), 2)],
            "columns": list(common), "items": int(sum(len(v) for v in common.values())),
            "a_better": wins, "b_better": losses, "sign_test_p": round(p_sign, 4),
            "significant": bool((lo > 0 or hi < 0) and p_sign < 0.05)}


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test of paired items (ties dropped): the chance of a split at least this uneven."""
    n = wins + losses
    if n == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(wins, n, 0.5).pvalue)


# ----------------------------------------------------------------------------- scoring and reports


def score_arm(qs: list, records: dict[str, dict[str, Any]]):
    from misi_agent.bench.scoring import score_all

    preds = {i: r.get("prediction") for i, r in records.items()}
    return score_all(qs, preds)


def arm_summary(arm: ArmSpec, qs: list, records: dict, cfg: AblationConfig) -> dict[str, Any]:
    """Scores, CIs and planner statistics of one arm on one set."""
    result = score_arm(qs, records)
    comp = {c: [] for c in T.COLUMNS}
    exact = {c: [] for c in T.COLUMNS}
    by_id: dict[str, dict[str, float]] = {c: {} for c in T.COLUMNS}
    for it in result.items:
        comp[it.column].append(it.composite)
        exact[it.column].append(float(it.exact))
        by_id[it.column][it.id] = it.composite
    ci = {}
    for c in T.COLUMNS:
        if comp[c]:
            lo, hi = bootstrap_ci({c: comp[c]}, _avg_stat((c,)), cfg.bootstrap, cfg.seed)
            elo, ehi = wilson(int(sum(exact[c])), len(exact[c]))
            ci[c] = {"composite": [round(lo, 2), round(hi, 2)], "exact": [round(elo, 2), round(ehi, 2)]}
    for key, which in (("average", T.PAPER_AVG_COLUMNS), ("average_all", T.COLUMNS)):
        lo, hi = bootstrap_ci(comp, _avg_stat(which), cfg.bootstrap, cfg.seed)
        ci[key] = {"composite": [None if lo is None else round(lo, 2), None if hi is None else round(hi, 2)]}
    recs = [records[q.id] for q in qs if q.id in records]
    planner = None
    if arm.kind in ("vlm", "oracle") and recs:
        n = len(recs)
        with_calls = [r for r in recs if r.get("n_calls")]
        planner = {
            "items": n,
            "items_with_calls": len(with_calls),
            "valid_call_items_pct": round(100 * sum(bool(r.get("all_calls_valid")) for r in recs) / n, 2),
            "valid_call_items_ci95": [round(v, 2) for v in wilson(sum(bool(r.get("all_calls_valid")) for r in recs), n)],
            "calls": sum(r.get("n_calls", 0) for r in recs),
            "valid_calls_pct": round(100 * sum(c["valid"] for r in recs for c in r.get("tool_calls", []))
                                     / max(1, sum(r.get("n_calls", 0) for r in recs)), 2),
            "first_call_as_router_pct": round(100 * sum(bool(r.get("first_call_as_router")) for r in recs) / n, 2),
            "first_tool_as_router_pct": round(100 * sum(_first_tool_right(q, records.get(q.id)) for q in qs
                                                        if q.id in records) / n, 2),
            "invalid_reasons": _count(c.get("invalid") for r in recs for c in r.get("tool_calls", []) if not c["valid"]),
            "mean_turns": round(sum(r.get("turns", 0) for r in recs) / n, 2),
            "max_turns": max(r.get("turns", 0) for r in recs),
            "answered_pct": round(100 * sum(bool(r.get("prediction")) for r in recs) / n, 2),
            "cached_steps": sum(r.get("cached_steps", 0) or 0 for r in recs),
        }
        by_task = {}
        for t in T.TASK_IDS:
            rt = [r for r in recs if r["task"] == t]
            if rt:
                by_task[t] = {"items": len(rt), "valid_call_items_pct": round(100 * sum(bool(r.get("all_calls_valid"))
                                                                                       for r in rt) / len(rt), 1),
                              "first_call_as_router_pct": round(100 * sum(bool(r.get("first_call_as_router"))
                                                                          for r in rt) / len(rt), 1)}
        planner["by_task"] = by_task
    errors = _count((r.get("error") or "").split(":")[0][:80] for r in recs if r.get("error"))
    return {"result": result, "ci": ci, "by_id": by_id, "planner": planner, "errors": errors}


def _first_tool_right(q, rec: dict | None) -> bool:
    """The model's first call names the tool the router calls for this question (arguments aside)."""
    calls = (rec or {}).get("tool_calls") or []
    exp = expected_call(q)
    return bool(calls) and exp is not None and calls[0].get("name") == exp[0]


def _count(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _p(p: float) -> str:
    return "<1e-4" if p < 1e-4 else f"{p:.2g}"


def _fmt(v: float | None) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"


def tables_markdown(set_name: str, n_items: int, arms: list[ArmSpec], summaries: dict[str, dict],
                    status: dict[str, dict], diffs: list[dict]) -> str:
    """The set's tables: composite, exact match, CIs, planner statistics, paired differences."""
    from misi_agent.bench.report import PAPER_COMPOSITE, PAPER_EXACT, REFERENCE_ROWS

    cols = T.COLUMNS
    head = ["arm", "Avg", "Avg (all 10)"] + [T.COLUMN_LABELS[c] for c in cols] + ["n"]
    sep = ["---"] + ["---:"] * (len(head) - 1)
    out = [f"## Set `{set_name}` ({n_items} questions)", ""]

    def paper_all(vals: dict) -> float | None:
        return sum(vals[c] for c in cols) / len(cols) if all(c in vals for c in cols) else None

    for title, attr, paper in (("Composite score", "composite", PAPER_COMPOSITE), ("Exact match (%)", "exact", PAPER_EXACT)):
        out += [f"### {title}", "", "| " + " | ".join(head) + " |", "| " + " | ".join(sep) + " |"]
        for name in REFERENCE_ROWS:
            v = paper[name]
            out.append("| " + " | ".join([f"{name} (paper, MiSI-Bench tiny)", _fmt(v.get("average")), _fmt(paper_all(v))]
                                         + [_fmt(v.get(c)) for c in cols] + ["50/task"]) + " |")
        for arm in arms:
            st = status.get(arm.name, {})
            if st.get("status") == NOT_AVAILABLE_MARK:
                out.append("| " + " | ".join([f"**{arm.label}**", NOT_AVAILABLE_MARK] + [""] * (len(head) - 2)) + " |")
                continue
            s = summaries.get(arm.name)
            if s is None:
                continue
            r = s["result"]
            cells = [f"**{arm.label}**", _fmt(r.average[attr]), _fmt(r.average_all[attr])]
            cells += [_fmt(getattr(r.columns[c], attr)) if r.columns[c].n else "–" for c in cols]
            cells.append(str(r.n_items))
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    out += ["### 95% confidence intervals of the composite score (bootstrap over items)", "",
            "| " + " | ".join(["arm", "Avg", "Avg (all 10)"] + [T.COLUMN_LABELS[c] for c in cols]) + " |",
            "| " + " | ".join(["---"] + ["---:"] * (len(cols) + 2)) + " |"]
    for arm in arms:
        s = summaries.get(arm.name)
        if s is None:
            continue
        ci = s["ci"]

        def cell(k: str) -> str:
            v = ci.get(k, {}).get("composite")
            return "–" if not v or v[0] is None else f"{v[0]:.0f}–{v[1]:.0f}"

        out.append("| " + " | ".join([arm.label, cell("average"), cell("average_all")] + [cell(c) for c in cols]) + " |")
    out.append("")
    planners = [(a, summaries[a.name]["planner"]) for a in arms if a.name in summaries and summaries[a.name]["planner"]]
    if planners:
        out += ["### Planner arms: tool calls and turns (from the agent traces)", "",
                "| arm | items | items with calls | items with only valid calls (%) | 95% CI | valid calls (%) | "
                "first tool = router's (%) | first call = router's, arguments too (%) | mean turns | max turns | "
                "answered (%) |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for a, p in planners:
            ci = p["valid_call_items_ci95"]
            out.append(f"| {a.label} | {p['items']} | {p['items_with_calls']} | {p['valid_call_items_pct']:.1f} | "
                       f"{ci[0]:.0f}–{ci[1]:.0f} | {p['valid_calls_pct']:.1f} | {p['first_tool_as_router_pct']:.1f} | "
                       f"{p['first_call_as_router_pct']:.1f} | {p['mean_turns']:.2f} | {p['max_turns']} | "
                       f"{p['answered_pct']:.1f} |")
        out += ["", "Valid: the call parses, names a listed tool and its arguments pass the tool's JSON schema. "
                "Router's call: the call the symbolic router makes for the question (PDB IDs compared "
                "case-insensitively). For the oracle arm the inserted call is not counted; only the model's own calls are."]
        out.append("")
    if diffs:
        out += ["### Paired differences (composite, mean over the columns both arms cover)", "",
                "Same items for both arms. Beyond noise: the 95% paired bootstrap interval excludes 0 **and** the "
                "two-sided exact sign test over the items that differ gives p < 0.05 (with 10-20 items a column, "
                "the bootstrap alone is too generous when only a few items differ).", "",
                "| A | B | A − B | 95% CI | items A better / B better | sign test p | beyond noise | "
                "columns beyond noise (A − B) |",
                "| --- | --- | ---: | ---: | ---: | ---: | :---: | --- |"]
        for d in diffs:
            cols_sig = ", ".join(f"{T.COLUMN_LABELS[c]} {v['difference']:+.0f}" for c, v in d.get("per_column", {}).items()
                                 if v["significant"]) or "none"
            out.append(f"| {d['a']} | {d['b']} | {d['difference']:+.2f} | {d['ci95'][0]:+.1f} … {d['ci95'][1]:+.1f} | "
                       f"{d['a_better']} / {d['b_better']} | {_p(d['sign_test_p'])} | "
                       f"{'yes' if d['significant'] else 'no'} | {cols_sig} |")
        out.append("")
    notes = [f"- `{a.name}`: {status[a.name].get('reason')}" for a in arms
             if status.get(a.name, {}).get("status") == NOT_AVAILABLE_MARK]
    if notes:
        out += ["Arms not available:", *notes, ""]
    return "\n".join(out) + "\n"


def plot_set(set_name: str, arms: list[ArmSpec], summaries: dict[str, dict], path: Path) -> None:
    """Grouped bars: composite per column and both averages for the paper's rows and every arm (95% CI bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from misi_agent.bench.report import PAPER_COMPOSITE, REFERENCE_ROWS

    cols = list(T.COLUMNS)
    labels = [T.COLUMN_LABELS[c] for c in cols] + ["Avg", "Avg (10)"]
    series = []
    for name in REFERENCE_ROWS:
        v = PAPER_COMPOSITE[name]
        series.append((f"{name} (paper)", [v[c] for c in cols] + [v["average"], sum(v[c] for c in cols) / len(cols)],
                       None))
    for arm in arms:
        s = summaries.get(arm.name)
        if s is None:
            continue
        r, ci = s["result"], s["ci"]
        vals = [r.columns[c].composite if r.columns[c].n else np.nan for c in cols]
        vals += [r.average["composite"], r.average_all["composite"]]
        vals = [np.nan if v is None else v for v in vals]
        keys = cols + ["average", "average_all"]
        err = [[], []]
        for k, v in zip(keys, vals):
            b = ci.get(k, {}).get("composite")
            if b and b[0] is not None and not np.isnan(v):
                err[0].append(max(0.0, v - b[0]))
                err[1].append(max(0.0, b[1] - v))
            else:
                err[0].append(0.0)
                err[1].append(0.0)
        series.append((arm.label, vals, err))
    x = np.arange(len(labels))
    width = 0.85 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(12, 1.2 * len(labels) + 0.3 * len(series)), 5.2), dpi=100)
    cmap = plt.get_cmap("tab10")
    for k, (name, vals, err) in enumerate(series):
        color = ("#9e9e9e", "#5b5b5b")[k] if k < 2 else cmap((k - 2) % 10)
        ax.bar(x + (k - (len(series) - 1) / 2) * width, vals, width, label=name, color=color,
               yerr=err, error_kw={"elinewidth": 0.6, "capsize": 1.5} if err else None)
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_ylim(0, 105)
    ax.set_ylabel("composite score")
    ax.set_title(f"MiSI-Bench ablation, set {set_name} (bars: 95% bootstrap CI; paper rows: MiSI-Bench(tiny))")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)


def training_reports(cfg: AblationConfig, arms: list[ArmSpec]) -> dict[str, Any]:
    """Copy each used model's training log and loss plot next to the results; one plot with every loss curve."""
    import shutil

    out: dict[str, Any] = {}
    logs = {}
    folder = cfg.results_dir / "models"
    for name in dict.fromkeys(a.model for a in arms if a.model):
        m = cfg.models[name]
        log_path = m.path / "training_log.json"
        if not log_path.is_file():
            out[name] = {"path": str(m.path), "training_log": None}
            continue
        folder.mkdir(parents=True, exist_ok=True)
        log = json.loads(log_path.read_text())
        shutil.copyfile(log_path, folder / f"{name}.training_log.json")
        if (m.path / "loss.png").is_file():
            shutil.copyfile(m.path / "loss.png", folder / f"{name}.loss.png")
        logs[f"{name} ({log.get('flavour')})"] = log["train"]
        out[name] = {"path": str(m.path), "flavour": log.get("flavour"), "model": log.get("model"),
                     "seconds": log.get("seconds"), "memory": log.get("memory"), "data": {
                         k: v for k, v in (log.get("data") or {}).items() if k != "distill"},
                     "optimizer_steps": log["train"].get("optimizer_steps"), "epochs": log["train"].get("epochs"),
                     "final_loss_mean_of_last_20": round(sum(log["train"]["loss"][-20:]) / max(1, len(log["train"]["loss"][-20:])), 4),
                     "stopped": log["train"].get("stopped"), "device": log.get("device"),
                     "torch_threads": log.get("torch_threads")}
    if logs:
        from finetune import plot_loss

        plot_loss(logs, folder / "loss_curves.png")
    return out


def git_state() -> dict[str, Any] | None:
    """The checkout's commit and whether it has uncommitted changes (recorded with the results)."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode:
        return None
    return {"commit": head.stdout.strip(), "uncommitted_changes": bool(dirty.stdout.strip())}


def _rel(text: str) -> str:
    """Paths inside the repository written relative to its root (commands then work in any checkout)."""
    return text.replace(str(REPO) + os.sep, "")


def commands_text(cfg: AblationConfig, config_path: str) -> str:
    """The exact commands that reproduce the results (recorded beside them)."""
    return _rel(_commands_text(cfg, config_path))


def _commands_text(cfg: AblationConfig, config_path: str) -> str:
    lines = ["# Reproduce (from the repository root, after `pip install -e .`)", "",
             f"python eval/ablation.py --config {config_path}", "",
             "# ... which runs, when their outputs are missing:"]
    for s in cfg.sets.values():
        lines.append(s.command())
    seen = set()
    for m in cfg.models.values():
        if m.train_config is not None and (m.train_config, m.flavour) not in seen:
            seen.add((m.train_config, m.flavour))
            rel = os.path.relpath(m.train_config, REPO)
            lines.append(f"python eval/finetune.py --config {rel} --flavour {m.flavour} --out {os.path.relpath(m.path, REPO)}")
    lines += ["", "# Single arms through the agent CLI (same predictions, without the ablation bookkeeping):"]
    structures = " ".join(f"--structures {s}" for s in cfg.structures)
    for s in cfg.sets.values():
        for a in cfg.arms:
            if a.sets and s.name not in a.sets:
                continue
            if a.kind == "router" and a.hbonds == "chimerax":
                lines.append(f"misi-agent run {s.questions} --out {a.name}-{s.name}.jsonl --planner router {structures} "
                             f"--grounding {a.grounding}")
            elif a.kind == "vlm" and a.tools:
                m = cfg.models[a.model]
                lo, hi = m.pixel_limits()
                px = (f" --min-pixels {lo}" if lo else "") + (f" --max-pixels {hi}" if hi else "")
                lines.append(f"misi-agent run {s.questions} --out {a.name}-{s.name}.jsonl --planner transformers:{m.path} "
                             f"{structures}{px} --max-new-tokens {m.max_new_tokens} --max-turns {a.max_turns}")
    lines += ["misi-agent bench score --gold QUESTIONS.jsonl --pred PREDICTIONS.jsonl --report report.json --plot scores.png"]
    return "\n".join(lines) + "\n"


def run(cfg: AblationConfig, *, arms: list[str] | None = None, sets: list[str] | None = None, progress: bool = True,
        score_only: bool = False, max_items: int | None = None, config_path: str | None = None,
        fingerprint: str | None = None) -> dict[str, Any]:
    """Run (or resume) every selected arm on every selected set, then score and report. Returns the JSON summary.

    ``fingerprint`` pins the tool-code fingerprint of the cache keys (default: hashed from the sources)."""
    from misi_agent.agent.store import StructureStore
    from misi_agent.bench.question import read_questions

    chosen_arms = [a for a in cfg.arms if arms is None or a.name in arms]
    if arms is not None:
        missing = sorted(set(arms) - {a.name for a in cfg.arms})
        if missing:
            raise EvalError(f"unknown arm(s): {', '.join(missing)}")
    chosen_sets = [s for s in cfg.sets.values() if sets is None or s.name in sets]
    cfg.results_dir.mkdir(parents=True, exist_ok=True)
    store = StructureStore(cfg.structures, use_env=False)
    cache = CallCache(cfg.cache) if cfg.cache else None
    fingerprint = fingerprint or code_fingerprint()
    report: dict[str, Any] = {"config": cfg.source, "name": cfg.name, "sets": {}, "code_fingerprint": fingerprint,
                              "git": git_state()}
    t_start = time.perf_counter()
    try:
        qsets = {s.name: (ensure_question_set(s, progress=progress), s) for s in chosen_sets}
        if not score_only:
            for arm in chosen_arms:
                if arm.kind in ("vlm", "oracle"):
                    ensure_model(cfg.models[arm.model], progress)
        all_status: dict[str, dict[str, dict]] = {}
        for s in chosen_sets:
            qpath, _ = qsets[s.name]
            qs = read_questions(qpath, validate=False)
            all_status[s.name] = {}
            for arm in chosen_arms:
                if arm.sets and s.name not in arm.sets:
                    continue
                out_dir = cfg.results_dir / s.name / arm.name
                if score_only:
                    sp = out_dir / "status.json"
                    all_status[s.name][arm.name] = json.loads(sp.read_text()) if sp.is_file() else {"status": "ok"}
                    continue
                runner = ArmRunner(arm, cfg, store, cache, fingerprint)
                runner.open()
                try:
                    all_status[s.name][arm.name] = run_arm(runner, s.name, qpath, qs, out_dir, progress, max_items)
                finally:
                    runner.close()
        # the tables cover every configured arm with predictions on disk, not only the arms run now
        # (adding one arm to a finished ablation must not drop the others from its tables)
        for s in chosen_sets:
            qpath, _ = qsets[s.name]
            qs = read_questions(qpath, validate=False)
            set_arms = [a for a in cfg.arms if not a.sets or s.name in a.sets]
            for arm in set_arms:
                if arm.name not in all_status[s.name]:
                    sp = cfg.results_dir / s.name / arm.name / "status.json"
                    all_status[s.name][arm.name] = json.loads(sp.read_text()) if sp.is_file() else {"status": "not run"}
            summaries = {}
            for arm in set_arms:
                if all_status[s.name].get(arm.name, {}).get("status") == NOT_AVAILABLE_MARK:
                    continue
                recs = read_records(cfg.results_dir / s.name / arm.name / "predictions.jsonl")
                aq = arm_questions(arm, qs)
                if max_items is not None:
                    aq = aq[:max_items]
                if not recs:
                    continue
                summaries[arm.name] = arm_summary(arm, aq, recs, cfg)
            diffs = []
            names = [a for a in set_arms if a.name in summaries]
            for i, a in enumerate(names):
                for b in names[i + 1:]:
                    d = paired_difference(summaries[a.name]["by_id"], summaries[b.name]["by_id"], T.COLUMNS,
                                          cfg.bootstrap, cfg.seed)
                    if d is not None:
                        per_col = {}
                        for c in d["columns"]:
                            dc = paired_difference(summaries[a.name]["by_id"], summaries[b.name]["by_id"], (c,),
                                                   cfg.bootstrap, cfg.seed)
                            if dc is not None:
                                per_col[c] = {k: dc[k] for k in ("difference", "ci95", "items", "a_better", "b_better",
                                                                  "sign_test_p", "significant")}
                        diffs.append({"a": a.name, "b": b.name, **d, "per_column": per_col})
            md = tables_markdown(s.name, len(qs), set_arms, summaries, all_status[s.name], diffs)
            set_dir = cfg.results_dir / s.name
            set_dir.mkdir(parents=True, exist_ok=True)
            write_text_atomic(set_dir / "table.md", md)
            plot_set(s.name, set_arms, summaries, set_dir / "scores.png")
            report["sets"][s.name] = {
                "questions": str(qpath), "generate": s.command(), "n_questions": len(qs),
                "arms": {a.name: {"label": a.label, "kind": a.kind, "description": a.description,
                                  "status": all_status[s.name].get(a.name),
                                  **({"scores": {k: v for k, v in summaries[a.name]["result"].to_dict().items()
                                                 if k != "items"},
                                      "ci95": summaries[a.name]["ci"], "planner": summaries[a.name]["planner"],
                                      "errors": summaries[a.name]["errors"]} if a.name in summaries else {})}
                         for a in set_arms},
                "paired_differences": diffs,
            }
            if progress:
                print(md)
        previous = cfg.results_dir / "results.json"  # sets not chosen this time keep their last results
        if previous.is_file():
            try:
                old_sets = json.loads(previous.read_text()).get("sets", {})
            except ValueError:
                old_sets = {}
            for name, val in old_sets.items():
                if name not in report["sets"] and name in cfg.sets:
                    report["sets"][name] = val
        report["models"] = training_reports(cfg, cfg.arms)
        report["cache"] = cache.stats() if cache else None
        report["seconds"] = round(time.perf_counter() - t_start, 1)
        write_text_atomic(cfg.results_dir / "results.json", _rel(json.dumps(report, indent=2, default=str)) + "\n")
        write_text_atomic(cfg.results_dir / "commands.md", commands_text(cfg, config_path or cfg.source))
        md_all = "\n".join((cfg.results_dir / s.name / "table.md").read_text() for s in cfg.sets.values()
                            if (cfg.results_dir / s.name / "table.md").is_file())
        write_text_atomic(cfg.results_dir / "tables.md", f"# Ablation `{cfg.name}`\n\n" + md_all)
    finally:
        if cache is not None:
            cache.close()
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="ablation YAML (eval/configs/*.yaml)")
    ap.add_argument("--arms", default=None, help="comma-separated arm names (default: all)")
    ap.add_argument("--sets", default=None, help="comma-separated set names (default: all)")
    ap.add_argument("--score-only", action="store_true", help="only score the predictions already written")
    ap.add_argument("--max-items", type=int, default=None, help="at most this many questions per arm and set")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    try:
        cfg = AblationConfig.load(args.config)
        rep = run(cfg, arms=args.arms.split(",") if args.arms else None,
                  sets=args.sets.split(",") if args.sets else None, progress=not args.no_progress,
                  score_only=args.score_only, max_items=args.max_items, config_path=args.config)
        print(f"ablation: results in {cfg.results_dir} ({rep['seconds']} s; cache {rep['cache']})", file=sys.stderr)
    except MisiError as exc:
        print(f"ablation: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
