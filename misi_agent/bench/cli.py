"""``misi-agent bench``: ``score`` (here) and ``generate`` (misi_agent.bench.generate).

``misi-agent bench score --gold questions.jsonl --pred predictions.jsonl [--report report.json]
[--plot scores.png] [--system NAME]`` prints the composite and exact-match tables beside the
paper's Human and Qwen2.5VL-7B-SFT rows and writes the JSON report and the bar chart.

Predictions file policy (OURS["predictions_file"]): one JSON object a line with ``id`` and
``prediction`` (a string, or null for "no answer"); blank lines are skipped. A malformed
line, a missing key, a non-string prediction or a duplicated id stops with a one-line
error (exit 2): the file is broken or ambiguous, and scoring it would mislead. Ids that are
not in the gold set are ignored, counted and reported as a warning; if no id at all is in
the gold set, that is an error (the wrong gold file). Gold ids without a prediction score 0
and are counted as missing.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from misi_agent.bench.generate import register_generate
from misi_agent.bench.question import QuestionError, iter_json_records, read_questions
from misi_agent.bench.report import json_report, markdown_table, plot_scores, write_text_atomic
from misi_agent.bench.scoring import ScoreResult, score_all
from misi_agent.errors import MisiError


class PredictionsError(MisiError):
    """A predictions file that cannot be scored (one-line message)."""


def read_predictions(path: str | Path, gold_ids: set[str]) -> tuple[dict[str, str | None], list[str], dict[str, int]]:
    """(id -> prediction, warnings, counts) from a predictions JSONL file; see the module policy."""
    p = Path(path)
    preds: dict[str, str | None] = {}
    first_line: dict[str, str] = {}
    unknown: list[str] = []
    n_lines = 0
    try:
        records = list(iter_json_records(p, what="predictions"))
    except QuestionError as exc:
        raise PredictionsError(str(exc)) from None
    for where, obj in records:
        n_lines += 1
        if not isinstance(obj, dict):
            raise PredictionsError(f"{where}: expected a JSON object with 'id' and 'prediction'")
        for key in ("id", "prediction"):
            if key not in obj:
                raise PredictionsError(f"{where}: missing field {key!r}")
        qid = obj["id"]
        if isinstance(qid, int) and not isinstance(qid, bool):
            qid = str(qid)
        if not isinstance(qid, str) or not qid:
            raise PredictionsError(f"{where}: 'id' must be a non-empty string")
        pred = obj["prediction"]
        if pred is not None and not isinstance(pred, str):
            raise PredictionsError(f"{where}: 'prediction' of {qid!r} must be a string or null, got {type(pred).__name__}")
        if qid in first_line:
            raise PredictionsError(f"{where}: duplicate prediction id {qid!r} (first at {first_line[qid]})")
        first_line[qid] = where
        if qid not in gold_ids:
            unknown.append(qid)
            continue
        preds[qid] = pred
    if n_lines and not preds:
        raise PredictionsError(f"none of the {n_lines} prediction ids in {p.name} is in the gold set")
    warnings = []
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:3]) + (", ..." if len(unknown) > 3 else "")
        warnings.append(f"{len(unknown)} prediction id(s) not in the gold set were ignored: {shown}")
    missing = len(gold_ids) - len(preds)
    if missing:
        warnings.append(f"{missing} of {len(gold_ids)} gold question(s) have no prediction and score 0")
    counts = {"prediction_lines": n_lines, "matched": len(preds), "unknown_ids": len(unknown), "missing": missing}
    return preds, warnings, counts


def cmd_score(args: argparse.Namespace) -> int:
    """Score predictions against gold questions; print tables; write the report and plot if asked."""
    for out in (args.report, args.plot):
        if out is not None and not Path(out).parent.exists():
            raise PredictionsError(f"output folder does not exist: {Path(out).parent}")
    questions = read_questions(args.gold, validate=True, check_images=False)
    preds, warnings, counts = read_predictions(args.pred, {q.id for q in questions})
    result: ScoreResult = score_all(questions, preds)
    counts["unparsed"] = result.n_unparsed
    for w in warnings:
        print(f"misi-agent: warning: {w}", file=sys.stderr)
    if args.report:
        rep = json_report(result, system=args.system, gold=str(args.gold), predictions=str(args.pred),
                          warnings=warnings, counts=counts)
        write_text_atomic(args.report, json.dumps(rep, indent=2) + "\n")
    if args.plot:
        plot_scores(result, args.plot, system=args.system)
    sys.stdout.write(markdown_table(result, system=args.system))
    return 0


def register(subparsers) -> None:
    """Add ``bench`` with its sub-commands to the top-level parser."""
    bench = subparsers.add_parser("bench", help="generate and score MiSI-Bench question sets",
                                  description="Generate (generate) and score (score) MiSI-Bench question sets.")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True)

    score = bench_sub.add_parser("score", help="score predictions against gold questions",
                                 description="Score a predictions JSONL ({id, prediction} per line) against a gold "
                                             "questions file, paper-faithfully (composite and exact match).")
    score.add_argument("--gold", required=True, type=Path, help="gold questions (.jsonl, or .json)")
    score.add_argument("--pred", required=True, type=Path, help="predictions JSONL: {\"id\": ..., \"prediction\": ...}")
    score.add_argument("--report", type=Path, default=None, help="write the JSON report here")
    score.add_argument("--plot", type=Path, default=None, help="write a bar chart PNG here")
    score.add_argument("--system", default="misi-agent", help="name of the scored system in tables and plots")
    score.set_defaults(func=cmd_score)

    # --- bench generate: owned by misi_agent/bench/generate.py
    register_generate(bench_sub)
