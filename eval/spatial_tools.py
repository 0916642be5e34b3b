"""Evaluate the spatial tools directly (no planner) on a generated question set.

    python eval/spatial_tools.py QUESTIONS.jsonl --structures DIR --label raster \\
        [--out eval/results] [--limit N] [--failures 8]

For every geometric question (translation, rotation, zooming, translation + rotation,
rotation + rotation, docking, interaction location) this does what a test taker can do:
reads the question's text (:func:`misi_agent.agent.details.read_details`: PDB ID, ligand
code, named bond, options), builds the call the router would make
(:func:`misi_agent.agent.planners.router.first_call`) and calls the spatial tool from
:mod:`misi_agent.tools.agent_tools` on the question's images and the structure store
``--structures``. The gold answers are used only to score the tools' answers, with the
benchmark's scoring (:mod:`misi_agent.bench.scoring`).

Writes, under ``--out``:

* ``spatial_tools_<label>.json``: per-task composite and exact scores, how often the tool
  said it was sure and how often it was right when sure and when unsure, tool seconds per
  item (median, mean, max), and every item's prediction, score, margin and residual;
* ``spatial_tools_<label>.md``: the same as a table, plus the failure cases;
* ``spatial_failures/<label>/<id>.png``: for up to ``--failures`` failures per task, the
  question's images side by side with the gold answer and the tool's answer; likewise
  ``spatial_unsure/<label>/<id>.png`` for right answers the tool was unsure of (the hard cases);
* ``spatial_tools.md`` / ``spatial_tools.png``: all labels found in ``--out`` side by side
  (a bar chart of composite scores per task and renderer).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import misi_agent  # noqa: F401  (before numpy: pins OpenBLAS's kernel, misi_agent.reproducibility)
import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from misi_agent.agent.context import AgentContext  # noqa: E402
from misi_agent.agent.details import read_details  # noqa: E402
from misi_agent.agent.planners.router import first_call  # noqa: E402
from misi_agent.agent.registry import Registry  # noqa: E402
from misi_agent.agent.store import StructureStore  # noqa: E402
from misi_agent.bench import tasks as T  # noqa: E402
from misi_agent.bench.question import read_questions  # noqa: E402
from misi_agent.bench.scoring import score_item  # noqa: E402
from misi_agent.tools.agent_tools import agent_tools  # noqa: E402

GEOMETRIC = (T.TRANSLATION, T.ROTATION, T.ZOOMING, T.TRANSLATION_ROTATION, T.ROTATION_ROTATION, T.DOCKING,
             T.INTERACTION_LOCATION)
TARGETS = {T.TRANSLATION: 98, T.ROTATION: 98, T.ZOOMING: 98, T.TRANSLATION_ROTATION: 98, T.ROTATION_ROTATION: 98,
           T.INTERACTION_LOCATION: 98, T.DOCKING: 90}


def first_per_task(questions: list, limit: int | None) -> list:
    """The first ``limit`` questions of each task, in file order (all of them without a limit)."""
    if not limit:
        return list(questions)
    seen: dict[str, int] = {}
    keep = []
    for q in questions:
        seen[q.task] = seen.get(q.task, 0) + 1
        if seen[q.task] <= limit:
            keep.append(q)
    return keep


def run_item(q, base: Path, store: StructureStore) -> dict:
    """Call the task's spatial tool on one question; returns the prediction and the tool's evidence."""
    images = q.image_paths(base)
    context = AgentContext(images, store)
    registry = Registry(agent_tools(context))
    t0 = time.perf_counter()
    try:
        name, args = first_call(q.task, read_details(q.question), len(images))
        res = registry.call(name, args)
    except Exception as exc:  # a question the router cannot read is a failure of the run, counted, not fatal
        return {"prediction": None, "error": f"{type(exc).__name__}: {exc}", "seconds": time.perf_counter() - t0}
    out = {"tool": name, "seconds": res.seconds}
    if not res.ok:
        out.update(prediction=None, error=res.error)
        return out
    o = res.output
    out.update(prediction=o["answer"], score=o.get("score"), runner_up=o.get("runner_up"), margin=o.get("margin"),
               residual=o.get("residual"), confident=o.get("confident"), notes=o.get("notes"),
               ligand=o.get("ligand"), details={k: v for k, v in o.get("details", {}).items()
                                                if k in ("inferred_commands", "displacement", "needed_move")})
    return out


def failure_picture(q, base: Path, rec: dict, path: Path) -> None:
    """The question's images in a row (scaled to 160 px) with gold and predicted answers underneath."""
    from PIL import Image, ImageDraw

    thumbs = []
    for p in q.image_paths(base):
        with Image.open(p) as im:
            thumbs.append(im.convert("RGB").resize((160, 160)))
    w = 160 * len(thumbs) + 4 * (len(thumbs) - 1)
    canvas = Image.new("RGB", (w, 160 + 44), (255, 255, 255))
    for k, t in enumerate(thumbs):
        canvas.paste(t, (k * 164, 0))
        ImageDraw.Draw(canvas).text((k * 164 + 3, 3), str(k + 1), fill=(255, 255, 0))
    d = ImageDraw.Draw(canvas)
    margin = rec.get("margin")
    d.text((4, 164), f"{q.id}   gold: {q.answer}   tool: {rec.get('prediction')}   composite {rec['composite']:.2f}",
           fill=(0, 0, 0))
    d.text((4, 182), f"score {rec.get('score')}  runner-up {rec.get('runner_up')}  margin "
                     f"{margin if margin is None else round(margin, 3)}  residual {rec.get('residual')}  "
                     f"confident {rec.get('confident')}  {rec.get('error') or ''}"[:200], fill=(0, 0, 0))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part.png")
    canvas.save(tmp)
    tmp.replace(path)


def summarise(records: list[dict]) -> dict:
    """Per-task composite/exact (×100), sure/unsure accuracy and tool seconds."""
    out = {}
    for task in GEOMETRIC:
        rs = [r for r in records if r["task"] == task]
        if not rs:
            continue
        secs = [r["seconds"] for r in rs]
        sure = [r for r in rs if r.get("confident")]
        unsure = [r for r in rs if not r.get("confident")]
        out[task] = {
            "n": len(rs),
            "composite": 100.0 * statistics.fmean(r["composite"] for r in rs),
            "exact": 100.0 * statistics.fmean(float(r["exact"]) for r in rs),
            "target": TARGETS[task],
            "errors": sum(1 for r in rs if r.get("error")),
            "confident": len(sure),
            "exact_when_confident": 100.0 * statistics.fmean(float(r["exact"]) for r in sure) if sure else None,
            "exact_when_unsure": 100.0 * statistics.fmean(float(r["exact"]) for r in unsure) if unsure else None,
            "seconds_median": statistics.median(secs),
            "seconds_mean": statistics.fmean(secs),
            "seconds_max": max(secs),
        }
    return out


def write_markdown(path: Path, label: str, source: str, summary: dict, records: list[dict], pictured: set) -> None:
    lines = [f"# Spatial tools on {label} images", "", f"Question set: `{source}`; tools called directly (no planner), "
             "structure grounding; gold answers used only for scoring.", "",
             "| task | n | composite | exact | target | sure | exact when sure | exact when unsure | median s | max s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for task, s in summary.items():
        f = (lambda v: "–" if v is None else f"{v:.1f}")
        lines.append(f"| {task} | {s['n']} | {s['composite']:.2f} | {s['exact']:.1f} | ≥{s['target']} | {s['confident']} | "
                     f"{f(s['exact_when_confident'])} | {f(s['exact_when_unsure'])} | {s['seconds_median']:.2f} | "
                     f"{s['seconds_max']:.2f} |")
    bad = [r for r in records if r["composite"] < 1.0]
    lines += ["", f"## Failures ({len(bad)})", ""]
    for r in bad:
        pic = f" — [picture](spatial_failures/{label}/{r['id']}.png)" if r["id"] in pictured else ""
        lines.append(f"- `{r['id']}`: gold `{r['gold']}`, tool `{r.get('prediction')}` (composite {r['composite']:.2f}, "
                     f"margin {r.get('margin')}, confident {r.get('confident')}){' ' + r['error'] if r.get('error') else ''}{pic}")
    unsure = [r for r in records if r["composite"] >= 1.0 and not r.get("confident")]
    lines += ["", f"## Right but unsure ({len(unsure)})", ""]
    for r in unsure:
        pic = f" — [picture](spatial_unsure/{label}/{r['id']}.png)" if r["id"] in pictured else ""
        why = "; ".join(r.get("notes") or [])
        lines.append(f"- `{r['id']}`: `{r.get('prediction')}` (margin {r.get('margin')}): {why}{pic}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def side_by_side(out: Path, stem: str, targets: dict, heading: str, intro: str, plot_title: str,
                 cell=lambda s: f"{s['composite']:.2f} (n={s['n']}, {s['seconds_median']:.2f} s)") -> None:
    """``<stem>.md`` and ``<stem>.png``: every ``<stem>_<label>.json`` in ``out`` side by side, per task."""
    runs = {}
    for p in sorted(out.glob(f"{stem}_*.json")):
        data = json.loads(p.read_text(encoding="utf-8"))
        runs[data["label"]] = data
    if not runs:
        return
    labels = list(runs)
    lines = [f"# {heading}", "", intro, "",
             "| task | target | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
    for task in GEOMETRIC:
        cells = []
        for lab in labels:
            s = runs[lab]["summary"].get(task)
            cells.append("–" if s is None else cell(s))
        lines.append(f"| {task} | ≥{targets[task]} | " + " | ".join(cells) + " |")
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.6))
    x = np.arange(len(GEOMETRIC))
    width = 0.8 / len(labels)
    for k, lab in enumerate(labels):
        vals = [runs[lab]["summary"].get(t, {}).get("composite", np.nan) for t in GEOMETRIC]
        ax.bar(x + (k - (len(labels) - 1) / 2) * width, vals, width, label=lab)
    ax.scatter(x, [targets[t] for t in GEOMETRIC], marker="_", s=400, color="black", label="target", zorder=3)
    ax.set_xticks(x, [T.COLUMN_LABELS[t] for t in GEOMETRIC])
    ax.set_ylim(0, 105)
    ax.set_ylabel("composite score")
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title(plot_title)
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=120)
    plt.close(fig)


def save_json(path: Path, data: dict) -> None:
    """Write ``data`` as JSON through a temporary file, so a killed run never leaves half a results file."""
    tmp = path.with_suffix(".part")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)


def combined_report(out: Path) -> None:
    """spatial_tools.md and spatial_tools.png: every spatial_tools_<label>.json in ``out`` side by side."""
    side_by_side(out, "spatial_tools", TARGETS, "Spatial tools: composite scores per task and renderer",
                 "Tools called directly on generated question sets (see the per-renderer files for details).",
                 "Spatial tools (structure known), per task and renderer")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("questions", help="questions.jsonl from 'misi-agent bench generate'")
    ap.add_argument("--structures", required=True, action="append", help="structure folder(s) for the store")
    ap.add_argument("--label", required=True, help="name of this run (e.g. the renderer)")
    ap.add_argument("--out", default=str(REPO / "eval" / "results"))
    ap.add_argument("--limit", type=int, default=None, help="at most this many questions per task")
    ap.add_argument("--failures", type=int, default=8, help="failure (and unsure) pictures per task")
    ap.add_argument("--redraw", action="store_true",
                    help="do not run the tools: redraw pictures and reports from spatial_tools_<label>.json")
    args = ap.parse_args(argv)
    qpath = Path(args.questions)
    questions = [q for q in read_questions(qpath) if q.task in GEOMETRIC]
    questions = first_per_task(questions, args.limit)
    store = StructureStore(args.structures, use_env=False, include_embedded=False)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jpath = out / f"spatial_tools_{args.label}.json"
    if args.redraw:
        records = json.loads(jpath.read_text(encoding="utf-8"))["items"]
    else:
        records = []
        for q in tqdm(questions, desc=f"spatial tools ({args.label})", unit="item"):
            rec = run_item(q, qpath.parent, store)
            s = score_item(q, rec.get("prediction"))
            rec.update(id=q.id, task=q.task, gold=q.answer, composite=s.composite, exact=s.exact, status=s.status)
            records.append(rec)
    summary = summarise(records)
    by_id = {q.id: q for q in questions}
    pictured = set()
    for kind, wanted in (("spatial_failures", lambda r: r["composite"] < 1.0),
                         ("spatial_unsure", lambda r: r["composite"] >= 1.0 and not r.get("confident"))):
        folder = out / kind / args.label
        if folder.is_dir():  # pictures of an earlier run of this label
            for old in folder.glob("*.png"):
                old.unlink()
        per_task: dict[str, int] = {}
        for r in records:
            if wanted(r) and r["id"] in by_id and per_task.get(r["task"], 0) < args.failures:
                failure_picture(by_id[r["id"]], qpath.parent, r, folder / f"{r['id']}.png")
                pictured.add(r["id"])
                per_task[r["task"]] = per_task.get(r["task"], 0) + 1
    save_json(jpath, {"label": args.label, "questions": str(qpath), "summary": summary, "items": records})
    write_markdown(out / f"spatial_tools_{args.label}.md", args.label, str(qpath), summary, records, pictured)
    combined_report(out)
    for task, s in summary.items():
        print(f"{task:22s} n={s['n']:3d} composite {s['composite']:6.2f} exact {s['exact']:5.1f} (target ≥{s['target']}) "
              f"sure {s['confident']:3d}  median {s['seconds_median']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
