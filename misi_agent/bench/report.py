"""Score reports: a markdown table, a JSON report and a bar chart, beside the paper's rows.

The paper's reference rows (arXiv 2512.10867, MiSI-Bench(tiny)): Table 1 composite scores
for every column and the average; Table 2 exact match where the paper gives it (averages
for Human and Qwen2.5VL-7B-SFT, docking and pocket-ligand for Qwen). The scored system is
shown beside Human and the best model, Qwen2.5VL-7B-SFT.
"""
from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

from misi_agent.bench import tasks as T
from misi_agent.bench.scoring import ScoreResult
from misi_agent.errors import MisiError

_C = T.COLUMNS
# Table 1 (composite), columns in tasks.COLUMNS order, then the paper's Avg.
PAPER_COMPOSITE: dict[str, dict[str, float]] = {
    name: dict(zip(_C + ("average",), row))
    for name, row in {
        "Human": (100.00, 70.18, 30.00, 100.00, 100.00, 32.00, 26.00, 74.54, 92.00, 82.78, 81.18),
        "Qwen2.5VL-7B-SFT": (99.84, 99.71, 27.14, 63.46, 89.52, 88.44, 89.59, 24.94, 88.37, 10.72, 62.96),
        "Claude Sonnet 4.5": (45.71, 44.18, 6.00, 22.33, 84.00, 28.00, 26.00, 34.12, 38.00, 0.60, 34.37),
        "O3": (52.29, 43.82, 2.00, 18.67, 94.00, 22.00, 22.44, 20.69, 36.00, 1.71, 33.65),
        "GPT-4.1": (29.71, 37.45, 2.00, 7.33, 80.00, 33.33, 29.26, 32.90, 36.00, 0.20, 29.20),
    }.items()
}
# Table 2 (exact match): only what the paper states.
PAPER_EXACT: dict[str, dict[str, float]] = {
    "Human": {"average": 76.25},
    "Qwen2.5VL-7B-SFT": {"average": 57.56, T.DOCKING: 0.75, T.POCKET_LIGAND: 0.78},
}
REFERENCE_ROWS = ("Human", "Qwen2.5VL-7B-SFT")


class ReportError(MisiError):
    """A report or plot cannot be written (one-line message)."""


def _fmt(v: float | None) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.2f}"


def markdown_table(result: ScoreResult, system: str = "misi-agent") -> str:
    """Two markdown tables (composite, exact match): paper rows, then ``system``; plus counts."""
    head = ["model", "Avg", "Avg (all 10)"] + [T.COLUMN_LABELS[c] for c in _C]
    sep = ["---"] + ["---:"] * (len(head) - 1)

    def row(name: str, vals: dict[str, float], avg_all: float | None) -> str:
        cells = [name, _fmt(vals.get("average")), _fmt(avg_all)] + [_fmt(vals.get(c)) for c in _C]
        return "| " + " | ".join(cells) + " |"

    def paper_all(vals: dict[str, float]) -> float | None:
        return sum(vals[c] for c in _C) / len(_C) if all(c in vals for c in _C) else None

    out = []
    for title, attr, paper in (("Composite score", "composite", PAPER_COMPOSITE), ("Exact match (%)", "exact", PAPER_EXACT)):
        out.append(f"### {title}")
        out.append("")
        out.append("| " + " | ".join(head) + " |")
        out.append("| " + " | ".join(sep) + " |")
        for name in REFERENCE_ROWS:
            out.append(row(f"{name} (paper)", paper[name], paper_all(paper[name])))
        mine = {c: getattr(result.columns[c], attr) for c in _C}
        mine["average"] = result.average[attr]
        out.append(row(f"**{system}**", mine, result.average_all[attr]))
        out.append("")
    n = ", ".join(f"{T.COLUMN_LABELS[c]} {result.columns[c].n}" for c in _C)
    out.append(f"Items: {result.n_items} ({n}); missing predictions {result.n_missing}, unparsed {result.n_unparsed}.")
    if result.empty_columns:
        out.append("Columns without items (left out of the averages): "
                   + ", ".join(T.COLUMN_LABELS[c] for c in result.empty_columns) + ".")
    out.append("Avg leaves out TransRot and RotRot as the paper does; Avg (all 10) includes them.")
    return "\n".join(out) + "\n"


def json_report(result: ScoreResult, *, system: str = "misi-agent", gold: str | None = None,
                predictions: str | None = None, warnings: list[str] | None = None,
                counts: dict[str, int] | None = None) -> dict[str, Any]:
    """The JSON report: inputs, counts, warnings, our scores, the paper's rows and per-item scores."""
    rep = {
        "system": system,
        "gold": gold,
        "predictions": predictions,
        "counts": dict(counts or {}),
        "warnings": list(warnings or []),
        "column_labels": dict(T.COLUMN_LABELS),
        "paper_average_excludes": [c for c in _C if c not in T.PAPER_AVG_COLUMNS],
        "paper": {"composite": PAPER_COMPOSITE, "exact": PAPER_EXACT},
        "decisions": {k: T.OURS[k] for k in ("magnitude_score", "docking_move_score", "list_share", "exact_tolerance",
                                              "net_motion", "averages", "predictions_file")},
    }
    rep.update(result.to_dict())
    return rep


def _temp_for(path: Path) -> tuple[int, str]:
    if not path.parent.exists():
        raise ReportError(f"output folder does not exist: {path.parent}")
    return tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix or ".tmp", dir=path.parent)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder (no partial files)."""
    p = Path(path)
    fd, tmp = _temp_for(p)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def plot_scores(result: ScoreResult, path: str | Path, system: str = "misi-agent") -> None:
    """A grouped bar chart of composite scores per column and the two averages: Human, Qwen-SFT, ``system``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    p = Path(path)
    labels = [T.COLUMN_LABELS[c] for c in _C] + ["Avg", "Avg (10)"]
    series = []
    for name in REFERENCE_ROWS:
        vals = PAPER_COMPOSITE[name]
        series.append((f"{name} (paper)", [vals[c] for c in _C] + [vals["average"], sum(vals[c] for c in _C) / len(_C)]))
    mine = [result.columns[c].composite for c in _C] + [result.average["composite"], result.average_all["composite"]]
    series.append((system, [np.nan if v is None else v for v in mine]))
    x = np.arange(len(labels))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(13, 4.8), dpi=100)
    colors = ("#9e9e9e", "#5b8cc9", "#d9822b")
    for k, (name, vals) in enumerate(series):
        ax.bar(x + (k - (len(series) - 1) / 2) * width, vals, width, label=name, color=colors[k % len(colors)])
    ax.set_xticks(x, labels, rotation=30, ha="right")
    ax.set_ylim(0, 105)
    ax.set_ylabel("composite score")
    ax.set_title(f"MiSI-Bench composite scores ({result.n_items} items; paper rows: MiSI-Bench(tiny))")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fd, tmp = _temp_for(p)
    os.close(fd)
    try:
        fig.savefig(tmp, format="png")
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        plt.close(fig)
