"""Scoring rules pinned by hand-computed cases, and the gold set scoring 100 on every column."""
from __future__ import annotations

import dataclasses
import math

import pytest
from bench_gold import gold_questions

from misi_agent.bench import tasks as T
from misi_agent.bench.answers import AxisValue, BondItem, parse_gold
from misi_agent.bench.question import Question
from misi_agent.bench.report import PAPER_COMPOSITE
from misi_agent.bench.scoring import (
    MISSING,
    OK,
    UNPARSED,
    aggregate,
    count_matches,
    list_share,
    magnitude_score,
    score_all,
    score_item,
)


def q(task: str, answer: str, options=None, qid: str = "x") -> Question:
    return Question(qid, task, "prompt", ["a.png"] * T.TASKS[task].n_images, answer, options, {})


def s(task: str, answer: str, pred, options=None) -> tuple[float, bool]:
    r = score_item(q(task, answer, options), pred)
    return r.composite, r.exact


# ----------------------------------------------------------------------------- T1 / T2 / T3


@pytest.mark.parametrize("pred,expected", [
    ("move x 3", (1.0, True)),
    ("move x 2", (0.875, False)),  # one bin off costs 1/8
    ("move x 4", (0.875, False)),
    ("move x -3", (0.25, False)),  # 1 - 6/8
    ("move x -4", (0.125, False)),
    ("move x -6", (0.0, False)),  # floored at 0
    ("move y 3", (0.0, False)),  # wrong axis
    ("move x 3.4", (1 - 0.4 / 8, True)),  # rounds to the true bin
    ("move x 3.6", (1 - 0.6 / 8, False)),
    ("move x 1, move x 2", (1.0, True)),  # net motion
    ("move x 3, move y 1", (0.0, False)),  # two axes: no single axis
    ("move x 3, roll y 0", (1.0, True)),  # a zero roll changes nothing
    ("move x 3, roll y 15", (0.0, False)),  # a translation answer with a real roll
    ("roll x 3", (0.0, False)),
])
def test_translation_rule(pred, expected):
    c, e = s(T.TRANSLATION, "move x 3", pred)
    assert c == pytest.approx(expected[0]) and e is expected[1]


@pytest.mark.parametrize("pred,expected", [
    ("roll y 15", (1.0, True)),
    ("roll y 30", (1 - 15 / 180, False)),  # one 15° bin costs 0.083
    ("roll y 0", (1 - 15 / 180, False)),
    ("roll y -90", (1 - 105 / 180, False)),
    ("roll y 375", (1.0, True)),  # modulo 360
    ("roll x 15", (0.0, False)),
    ("roll y 10, roll y 5", (1.0, True)),
    ("move y 15", (0.0, False)),
])
def test_rotation_rule(pred, expected):
    c, e = s(T.ROTATION, "roll y 15", pred)
    assert c == pytest.approx(expected[0]) and e is expected[1]


def test_rotation_difference_wraps_around():
    # roll x 180 and roll x -90 differ by 90° of real rotation, not 270°.
    assert magnitude_score(AxisValue("roll", "x", 180), AxisValue("roll", "x", -90), 180) == pytest.approx(0.5)
    assert s(T.ROTATION, "roll z -90", "roll z 270") == (1.0, True)


@pytest.mark.parametrize("pred,expected", [
    ("move z 50", 1.0), ("move z 50.4", 1.0), ("move z 51", 0.0), ("move z 49", 0.0), ("move z -50", 0.0),
    ("move x 50", 0.0), ("move z 20, move z 30", 1.0),
])
def test_zooming_is_accuracy(pred, expected):
    c, e = s(T.ZOOMING, "move z 50", pred)
    assert c == expected and e is bool(expected)


# ----------------------------------------------------------------------------- T7


@pytest.mark.parametrize("pred,expected,exact", [
    ("roll x 75, move x -14", 1.0, True),
    ("move x -14, roll x 75", 1.0, True),  # rolls about the ligand centre commute with moves
    ("roll x 60, move x -10", 0.5 * (1 - 15 / 180) + 0.5 * (1 - 4 / 14), False),
    ("roll y 75, move x -14", 0.5, False),  # wrong roll axis: only the move counts
    ("roll x 75, move x 14", 0.5, False),  # wrong sign: the move scores 0
    ("roll x 75, move x -30", 0.5, False),  # 1 - 16/14 < 0, floored
    ("roll x 75, move x -21", 0.5 + 0.5 * (1 - 7 / 14), False),
    ("roll x 75", 0.5, False),  # no move
    ("move x -14", 0.5, False),  # no roll
    ("roll x 75, move x -14, move y 1", 0.5, False),  # the move must be along x only
    ("roll x 75, roll y 15, move x -14", 0.5, False),  # two roll axes: no roll part
    ("roll x 90, move x -14.4", 0.5 * (1 - 15 / 180) + 0.5 * (1 - 0.4 / 14), False),
])
def test_docking_rule(pred, expected, exact):
    c, e = s(T.DOCKING, "roll x 75, move x -14", pred)
    assert c == pytest.approx(expected) and e is exact


def test_docking_exact_needs_both_parts_within_half_a_bin():
    assert s(T.DOCKING, "roll z -30, move x 12", "roll z -25, move x 12.3") == pytest.approx((1 - 5 / 180 / 2 - 0.3 / 12 / 2, True))


# ----------------------------------------------------------------------------- T4 / T9


@pytest.mark.parametrize("n_match,n_pred,n_gold,expected", [
    (2, 2, 2, 1.0),
    (1, 2, 2, 0.5),
    (1, 1, 2, 0.5),  # half the truth, nothing wrong
    (1, 3, 3, 1 / 3),
    (2, 3, 2, 0.5),  # every true bond plus an extra: 0.5 (the share would be 2/3)
    (3, 4, 3, 0.5),
    (2, 4, 2, 0.5),  # exactly twice as many: still 0.5
    (2, 5, 2, 0.0),  # more than twice as many: 0
    (1, 3, 1, 0.0),
    (2, 4, 3, 0.5),  # not a superset, 4 <= 6: plain share 2/4
    (3, 7, 3, 0.0),
    (0, 0, 2, 0.0),
    (0, 0, 0, 1.0),  # empty truth, empty answer
    (0, 1, 0, 0.0),
])
def test_list_share(n_match, n_pred, n_gold, expected):
    assert list_share(n_match, n_pred, n_gold) == pytest.approx(expected)


GOLD_T4 = "Yes: ARG NH2, O1B; ARG NE, O2G"


@pytest.mark.parametrize("pred,expected,exact", [
    ("Yes: ARG NH2, O1B; ARG NE, O2G", 1.0, True),
    ("Yes: ARG NE, O2G; ARG NH2, O1B", 1.0, True),  # any order
    ("Yes: ARG NH2, O1B", 0.5, False),
    ("Yes: ARG NH2, O1B; ARG NE, O2G; ARG NH1, O1B", 0.5, False),  # superset
    ("Yes: ARG NH2, O1B; ARG NE, O2G; ARG NH1, O1B; ARG NH1, O2G", 0.5, False),  # 4 = 2x: still 0.5
    ("Yes: ARG NH2, O1B; ARG NE, O2G; ARG NH1, O1B; ARG NH1, O2G; ARG N, O3G", 0.0, False),  # > 2x
    ("Yes: ARG NH2, O1B; ARG NH2, O1B", 0.5, False),  # a repeated bond counts once
    ("Yes: ARG 45 NH2 A, O1B; ARG 45 NE A, O2G", 1.0, True),  # number/chain ignored in T4
    ("Yes: LYS NH2, O1B; ARG NE, O2G", 0.5, False),  # wrong residue name
    ("No", 0.0, False),  # No on a positive
    ("Yes", 0.0, False),
])
def test_residue_ligand_positive(pred, expected, exact):
    c, e = s(T.RESIDUE_LIGAND, GOLD_T4, pred)
    assert c == pytest.approx(expected) and e is exact


@pytest.mark.parametrize("pred,expected", [("No", 1.0), ("no.", 1.0), ("There is no hydrogen bond.", 1.0),
                                           ("Yes: ARG NH2, O1B", 0.0), ("Yes", 0.0)])
def test_residue_ligand_negative(pred, expected):
    r = score_item(q(T.RESIDUE_LIGAND, "No"), pred)
    assert r.column == T.COL_RESLIG_NEG and r.composite == expected and r.exact is bool(expected)


GOLD_T9 = "ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A; ASP 25 OD1 B, O2"


@pytest.mark.parametrize("pred,expected,exact", [
    ("LYS 47 NZ A, O1A; ARG 45 NH2 A, O1B; ASP 25 OD1 B, O2", 1.0, True),
    ("ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A", 2 / 3, False),
    ("ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A; ASP 25 OD1 A, O2", 2 / 3, False),  # wrong chain on the third
    ("ARG 45 NH2, O1B; LYS 47 NZ, O1A; ASP 25 OD1, O2", 1.0, True),  # no chain: any chain
    ("ARG NH2, O1B; LYS NZ, O1A; ASP OD1, O2", 0.0, False),  # no residue number: never matches
    ("ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A; ASP 25 OD1 B, O2; GLY 27 O B, N3", 0.5, False),
    ("ARG 45 NH2 A, O1B; ARG 46 NH2 A, O1B; ARG 47 NH2 A, O1B; ARG 48 NH2 A, O1B; ARG 49 NH2 A, O1B; "
     "ARG 50 NH2 A, O1B; ARG 51 NH2 A, O1B", 0.0, False),
    ("None", 0.0, False),
])
def test_pocket_ligand(pred, expected, exact):
    c, e = s(T.POCKET_LIGAND, GOLD_T9, pred)
    assert c == pytest.approx(expected) and e is exact


def test_chainless_bonds_take_each_true_bond_once():
    gold = [BondItem("ASP", "OD1", "O2", "25", "A"), BondItem("ASP", "OD1", "O2", "25", "B")]
    one = [BondItem("ASP", "OD1", "O2", "25", None)]
    assert count_matches(one, gold, pocket=True) == 1
    # a bond named in full is matched first, so the chain-less one takes the other chain
    both = [BondItem("ASP", "OD1", "O2", "25", None), BondItem("ASP", "OD1", "O2", "25", "A")]
    assert count_matches(both, gold, pocket=True) == 2


def test_empty_pocket_truth():
    assert s(T.POCKET_LIGAND, "None", "None") == (1.0, True)
    assert s(T.POCKET_LIGAND, "None", "ARG 45 NH2 A, O1B") == (0.0, False)


# ----------------------------------------------------------------------------- choices, missing, unparsed


def test_choices_are_accuracy():
    assert s(T.TRANSLATION_ROTATION, "C", "Answer: (C)") == (1.0, True)
    assert s(T.ROTATION_ROTATION, "B", "C") == (0.0, False)
    opts = ["move x 3, move y 5", "move x -3, move y 5", "move x 3, move y -5", "move x 2, move y 5"]
    assert s(T.INTERACTION_LOCATION, "A", "move y 5, move x 3", opts) == (1.0, True)


def test_missing_and_unparsed_score_zero_and_are_counted():
    gold = q(T.TRANSLATION, "move x 3", qid="t1")
    r_missing = score_item(gold, None)
    r_empty = score_item(gold, "   ")
    r_bad = score_item(gold, "I cannot tell from these images.")
    r_ok = score_item(gold, "move y 3")
    assert (r_missing.status, r_empty.status, r_bad.status, r_ok.status) == (MISSING, MISSING, UNPARSED, OK)
    assert all(r.composite == 0.0 and not r.exact for r in (r_missing, r_empty, r_bad, r_ok))
    res = aggregate([r_missing, r_bad, r_ok, score_item(gold, "move x 3")])
    col = res.columns[T.TRANSLATION]
    assert (col.n, col.missing, col.unparsed, res.n_missing, res.n_unparsed) == (4, 1, 1, 1, 1)
    assert col.composite == pytest.approx(25.0)


# ----------------------------------------------------------------------------- the gold set


def test_gold_answers_score_100_on_every_column():
    qs = gold_questions()
    res = score_all(qs, {x.id: x.answer for x in qs})
    assert res.empty_columns == []
    for c in T.COLUMNS:
        assert res.columns[c].n >= 2, c
        assert res.columns[c].composite == pytest.approx(100.0), c
        assert res.columns[c].exact == pytest.approx(100.0), c
    assert res.average == {"composite": pytest.approx(100.0), "exact": pytest.approx(100.0)}
    assert res.average_all == {"composite": pytest.approx(100.0), "exact": pytest.approx(100.0)}
    assert res.n_missing == res.n_unparsed == 0
    assert sorted(res.t4_pos_by_n_bonds) == [1, 2, 3]


def test_gold_answers_wrapped_in_prose_still_score_100():
    qs = gold_questions()
    wrapped = {x.id: f"Let me look at the views carefully.\n\n**Answer:** `{x.answer}`" for x in qs}
    res = score_all(qs, wrapped)
    assert res.average_all["composite"] == pytest.approx(100.0)


def test_shuffled_answers_score_lower():
    qs = gold_questions()
    by_task: dict[str, list[Question]] = {}
    for x in qs:
        by_task.setdefault(x.task, []).append(x)
    shuffled = {}
    for items in by_task.values():  # every item gets the answer of the next item of its task
        for a, b in zip(items, items[1:] + items[:1]):
            shuffled[a.id] = b.answer
    res = score_all(qs, shuffled)
    for c in T.COLUMNS:
        if c == T.COL_RESLIG_NEG:  # both negatives are "No": shuffling cannot change them
            continue
        assert res.columns[c].composite < 100.0, c
    assert res.average["composite"] < 60.0
    assert res.average["exact"] < res.average["composite"] or res.average["exact"] < 50.0
    # a wholly missing prediction set scores 0 everywhere
    empty = score_all(qs, {})
    assert empty.average_all == {"composite": 0.0, "exact": 0.0} and empty.n_missing == len(qs)


def test_averages_are_unweighted_column_means_without_t5_t6():
    # The paper's Avg reproduces as the mean of its eight columns without TransRot/RotRot.
    # (GPT-4.1's printed Avg, 29.20, is 1.00 above the mean of its own columns, 28.20: a typo in the table.)
    for name, row in PAPER_COMPOSITE.items():
        mean8 = sum(row[c] for c in T.PAPER_AVG_COLUMNS) / len(T.PAPER_AVG_COLUMNS)
        expected = row["average"] - (1.0 if name == "GPT-4.1" else 0.0)
        assert mean8 == pytest.approx(expected, abs=0.02), name
    qs = gold_questions()
    preds = {x.id: x.answer for x in qs if x.task not in (T.TRANSLATION_ROTATION, T.ROTATION_ROTATION)}
    res = score_all(qs, preds)  # T5/T6 all missing -> 0
    assert res.average["composite"] == pytest.approx(100.0)
    assert res.average_all["composite"] == pytest.approx(80.0)


def test_empty_columns_are_left_out_of_the_averages():
    qs = [x for x in gold_questions() if x.task in (T.TRANSLATION, T.ROTATION)]
    res = score_all(qs, {qs[0].id: qs[0].answer})
    assert set(res.empty_columns) == set(T.COLUMNS) - {T.TRANSLATION, T.ROTATION}
    assert res.columns[T.TRANSLATION].composite == pytest.approx(50.0)
    assert res.average["composite"] == pytest.approx(25.0)  # (50 + 0) / 2
    assert res.columns[T.ZOOMING].composite is None


def test_gold_parse_rejects_malformed_gold():
    from misi_agent.bench.answers import AnswerError

    for task, ans in [(T.TRANSLATION, "move z 3"), (T.TRANSLATION, "roll x 3"), (T.ROTATION, "roll x 15, roll y 15"),
                      (T.DOCKING, "roll x 75"), (T.DOCKING, "roll x 75, move y -14"), (T.TRANSLATION_ROTATION, "E"),
                      (T.RESIDUE_LIGAND, "Maybe"), (T.RESIDUE_LIGAND, "Yes:"), (T.POCKET_LIGAND, "ARG NH2, O1B"),
                      (T.POCKET_LIGAND, "ARG 45 NH2 A, O1B; something else")]:
        with pytest.raises(AnswerError):
            parse_gold(q(task, ans))
    assert not math.isnan(parse_gold(q(T.ZOOMING, "move z 40")).value)


def test_item_scores_are_dataclasses_with_column():
    qs = gold_questions()
    r = score_item(qs[7], qs[7].answer)
    d = dataclasses.asdict(r)
    assert d["column"] == T.COL_RESLIG_POS and d["n_gold_bonds"] == 1
