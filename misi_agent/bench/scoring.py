"""Paper-faithful scoring: a composite score and exact match for every item, means per column.

Rules (MiSI-Bench, ../shared/docs/misi-bench.md "Scoring"; **(ours)** keys in tasks.OURS):

* T1 translation, T2 rotation: 0 unless the axis is right, else
  ``max(0, 1 - |d_pred - d| / span)``, span 8 Å / 180° (OURS["magnitude_score"]); angles
  compared modulo 360° (OURS["angle_wrap"]).
* T3 zooming, T5, T6, T8 (multiple choice): accuracy; composite = exact.
* T4 positives, T9: share of correctly predicted H-bonds, ``|P ∩ G| / max(|P|, |G|)``
  (OURS["list_share"]); a superset of the truth with extra bonds scores 0.5; more than twice
  as many bonds as the truth scores 0. T4 negatives: 1 for ``No``, else 0; ``No`` on a
  positive scores 0.
* T7 docking: 0.5 for the roll (right axis, then the T2 rule) + 0.5 for the move (along x,
  right sign, ``max(0, 1 - |d_pred - d| / |d|)``, OURS["docking_move_score"]).
* Exact match: magnitudes within half a bin, lists equal, letters equal (OURS["exact_tolerance"]).
* A missing prediction scores 0 and is counted; so is an unreadable one.
* Column means are reported ×100; the paper's Avg is the unweighted mean of the eight
  columns without T5/T6; the mean over all ten columns is reported beside it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from misi_agent.bench import tasks as T
from misi_agent.bench.answers import (
    AxisValue,
    BondItem,
    DockingAnswer,
    InteractionAnswer,
    parse_gold,
    parse_prediction,
    wrap_angle,
)

OK, MISSING, UNPARSED = "ok", "missing", "unparsed"


# ----------------------------------------------------------------------------- pure rules


def magnitude_score(pred: AxisValue | None, gold: AxisValue, span: float) -> float:
    """T1/T2: 0 unless the axis is right; else ``max(0, 1 - |d_pred - d| / span)``."""
    if pred is None or pred.op != gold.op or pred.axis != gold.axis:
        return 0.0
    diff = abs(wrap_angle(pred.value - gold.value)) if gold.op == "roll" else abs(pred.value - gold.value)
    return max(0.0, 1.0 - diff / span)


def magnitude_exact(pred: AxisValue | None, gold: AxisValue, step: float) -> bool:
    """Right axis and a value within half a bin of the truth."""
    if pred is None or pred.op != gold.op or pred.axis != gold.axis:
        return False
    diff = abs(wrap_angle(pred.value - gold.value)) if gold.op == "roll" else abs(pred.value - gold.value)
    return diff < step / 2.0


def list_share(n_match: int, n_pred: int, n_gold: int) -> float:
    """The H-bond list score from counts (OURS["list_share"] and the paper's two penalties).

    ``n_match`` true bonds were predicted among ``n_pred`` distinct predicted bonds;
    the truth has ``n_gold``. An empty truth scores 1 only for an empty answer.
    """
    if n_gold == 0:
        return 1.0 if n_pred == 0 else 0.0
    if n_pred > 2 * n_gold:
        return 0.0
    if n_match == n_gold and n_pred > n_gold:
        return 0.5
    return n_match / max(n_pred, n_gold)


def _key_residue(b: BondItem) -> tuple:
    return (b.residue_name, b.residue_atom, b.ligand_atom)  # OURS["residue_bond_key"]


def count_matches(pred: Iterable[BondItem], gold: Iterable[BondItem], *, pocket: bool) -> int:
    """How many true bonds the prediction names, each true bond at most once.

    Pocket form (T9, OURS["pocket_bond_key"]): name, number, atom, chain and ligand atom must
    agree; a predicted bond without a chain may take any chain; one without a number never
    matches. Residue form (T4): name, residue atom and ligand atom.
    """
    pred, gold = list(pred), list(gold)
    if not pocket:
        return len({_key_residue(b) for b in pred} & {_key_residue(b) for b in gold})
    free = list(gold)
    n = 0
    exact = [p for p in pred if p.chain is not None]
    wild = [p for p in pred if p.chain is None]
    for p in exact + wild:  # exact keys first, so a chain-less bond cannot steal a bond named in full
        if p.residue_number is None:
            continue
        for g in free:
            if (p.residue_name, p.residue_number, p.residue_atom, p.ligand_atom) == \
                    (g.residue_name, g.residue_number, g.residue_atom, g.ligand_atom) and p.chain in (None, g.chain):
                free.remove(g)
                n += 1
                break
    return n


def _distinct(bonds: Iterable[BondItem], pocket: bool) -> list[BondItem]:
    out, seen = [], set()
    for b in bonds:
        k = (b.residue_name, b.residue_number, b.residue_atom, b.chain, b.ligand_atom) if pocket else _key_residue(b)
        if k not in seen:
            seen.add(k)
            out.append(b)
    return out


def interaction_score(pred: InteractionAnswer | None, gold: InteractionAnswer, *, pocket: bool) -> tuple[float, bool]:
    """(composite, exact) for a T4 or T9 item."""
    if pred is None:
        return 0.0, False
    if not pocket and gold.verdict == "no":  # T4 negative: 1 for No
        ok = pred.verdict == "no"
        return float(ok), ok
    if not pocket and pred.verdict != "yes":  # No on a positive
        return 0.0, False
    p = _distinct(pred.bonds, pocket)
    g = list(gold.bonds)
    m = count_matches(p, g, pocket=pocket)
    score = list_share(m, len(p), len(g))
    return score, (m == len(g) == len(p))


def docking_score(pred: DockingAnswer | None, gold: DockingAnswer) -> tuple[float, bool]:
    """(composite, exact): 0.5 · T2 rule for the roll + 0.5 · move rule (OURS["docking_move_score"])."""
    if pred is None:
        return 0.0, False
    roll = 0.5 * magnitude_score(pred.roll, gold.roll, T.SPAN_ROTATION)
    roll_exact = magnitude_exact(pred.roll, gold.roll, T.DOCKING_ROLL_GRID.step)
    move, move_exact = 0.0, False
    d = gold.move[0]
    if pred.move is not None and abs(pred.move[1]) < 1e-9 and abs(pred.move[2]) < 1e-9:
        dp = pred.move[0]
        if dp * d > 0:  # the sign is right
            move = 0.5 * max(0.0, 1.0 - abs(dp - d) / abs(d))
            move_exact = abs(dp - d) < T.DOCKING_SHIFT_GRID.step / 2.0
    return roll + move, roll_exact and move_exact


# ----------------------------------------------------------------------------- items


@dataclass(frozen=True)
class ItemScore:
    """One item's result; ``composite`` in [0, 1]; ``status`` ok | missing | unparsed."""

    id: str
    task: str
    column: str
    composite: float
    exact: bool
    status: str
    n_gold_bonds: int | None = None


def score_item(question, prediction: str | None) -> ItemScore:
    """Score one prediction (None = missing) against a :class:`~misi_agent.bench.question.Question`."""
    info = T.task_info(question.task)
    gold = parse_gold(question)
    nb = len(gold.bonds) if isinstance(gold, InteractionAnswer) else None

    def result(composite: float, exact: bool, status: str = OK) -> ItemScore:
        return ItemScore(question.id, question.task, question.column, float(composite), bool(exact), status, nb)

    if prediction is None or (isinstance(prediction, str) and not prediction.strip()):
        return result(0.0, False, MISSING)
    pred = parse_prediction(question, prediction)
    if pred is None:
        return result(0.0, False, UNPARSED)
    m = info.metric
    if m == "translation":
        return result(magnitude_score(pred, gold, T.SPAN_TRANSLATION), magnitude_exact(pred, gold, T.TRANSLATION_GRID.step))
    if m == "rotation":
        return result(magnitude_score(pred, gold, T.SPAN_ROTATION), magnitude_exact(pred, gold, T.ROTATION_GRID.step))
    if m == "accuracy_zoom":
        ok = magnitude_exact(pred, gold, T.ZOOM_GRID.step)
        return result(float(ok), ok)
    if m == "choice":
        return result(float(pred == gold), pred == gold)
    if m == "docking":
        return result(*docking_score(pred, gold))
    return result(*interaction_score(pred, gold, pocket=(m == "interactions_pocket")))


# ----------------------------------------------------------------------------- aggregation


@dataclass
class ColumnScore:
    """Means ×100 over one column's items (None when the column holds no item)."""

    column: str
    n: int = 0
    composite: float | None = None
    exact: float | None = None
    missing: int = 0
    unparsed: int = 0


@dataclass
class ScoreResult:
    """Everything a report needs: per-column means, the two averages, counts and per-item scores."""

    columns: dict[str, ColumnScore]
    items: list[ItemScore]
    average: dict[str, float | None]  # paper Avg (no T5/T6): {"composite", "exact"}
    average_all: dict[str, float | None]  # all ten columns
    empty_columns: list[str]
    t4_pos_by_n_bonds: dict[int, dict[str, float]] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return len(self.items)

    @property
    def n_missing(self) -> int:
        return sum(i.status == MISSING for i in self.items)

    @property
    def n_unparsed(self) -> int:
        return sum(i.status == UNPARSED for i in self.items)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_items": self.n_items,
            "n_missing": self.n_missing,
            "n_unparsed": self.n_unparsed,
            "average": self.average,
            "average_all": self.average_all,
            "empty_columns": self.empty_columns,
            "columns": {c: asdict(s) for c, s in self.columns.items()},
            "t4_pos_by_n_bonds": {str(k): v for k, v in self.t4_pos_by_n_bonds.items()},
            "items": [asdict(i) for i in self.items],
        }


def _mean(values: list[float]) -> float | None:
    return 100.0 * sum(values) / len(values) if values else None


def _avg(columns: dict[str, ColumnScore], which: tuple[str, ...], attr: str) -> float | None:
    vals = [getattr(columns[c], attr) for c in which if columns[c].n]
    return sum(vals) / len(vals) if vals else None


def aggregate(items: list[ItemScore]) -> ScoreResult:
    """Column means, the paper's average (no T5/T6) and the ten-column average (OURS["averages"])."""
    cols = {c: ColumnScore(c) for c in T.COLUMNS}
    by_col: dict[str, list[ItemScore]] = {c: [] for c in T.COLUMNS}
    for it in items:
        by_col[it.column].append(it)
    for c, its in by_col.items():
        s = cols[c]
        s.n = len(its)
        s.composite = _mean([i.composite for i in its])
        s.exact = _mean([float(i.exact) for i in its])
        s.missing = sum(i.status == MISSING for i in its)
        s.unparsed = sum(i.status == UNPARSED for i in its)
    by_n: dict[int, dict[str, float]] = {}
    for n in sorted({i.n_gold_bonds for i in by_col[T.COL_RESLIG_POS] if i.n_gold_bonds is not None}):
        its = [i for i in by_col[T.COL_RESLIG_POS] if i.n_gold_bonds == n]
        by_n[n] = {"n": len(its), "composite": _mean([i.composite for i in its]),
                   "exact": _mean([float(i.exact) for i in its])}
    return ScoreResult(
        columns=cols,
        items=list(items),
        average={"composite": _avg(cols, T.PAPER_AVG_COLUMNS, "composite"), "exact": _avg(cols, T.PAPER_AVG_COLUMNS, "exact")},
        average_all={"composite": _avg(cols, T.COLUMNS, "composite"), "exact": _avg(cols, T.COLUMNS, "exact")},
        empty_columns=[c for c in T.COLUMNS if not cols[c].n],
        t4_pos_by_n_bonds=by_n,
    )


def score_all(questions, predictions: Mapping[str, str | None]) -> ScoreResult:
    """Score every gold question; a question whose id is not in ``predictions`` is missing."""
    return aggregate([score_item(q, predictions.get(q.id)) for q in questions])
