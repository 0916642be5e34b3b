"""``misi-agent bench score``: tables, JSON report, plot, and one-line errors with exit 2."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench_gold import gold_questions
from PIL import Image

from misi_agent.bench import tasks as T
from misi_agent.bench.question import write_questions
from misi_agent.cli import main


@pytest.fixture()
def files(tmp_path) -> dict[str, Path]:
    gold = tmp_path / "questions.jsonl"
    write_questions(gold, gold_questions())
    return {"gold": gold, "dir": tmp_path}


def write_preds(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["bench", "score", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_gold_predictions_score_100_with_report_and_plot(files, capsys):
    qs = gold_questions()
    pred = write_preds(files["dir"] / "pred.jsonl", [{"id": q.id, "prediction": q.answer} for q in qs])
    report, plot = files["dir"] / "report.json", files["dir"] / "scores.png"
    rc, out, err = run(capsys, "--gold", files["gold"], "--pred", pred, "--report", report, "--plot", plot,
                       "--system", "gold")
    assert rc == 0 and err == ""
    assert "| Human (paper) | 81.18 |" in out and "| Qwen2.5VL-7B-SFT (paper) | 62.96 |" in out
    assert "| **gold** | 100.00 | 100.00 | " + " | ".join(["100.00"] * 10) + " |" in out
    assert out.count("### ") == 2 and "Exact match" in out
    rep = json.loads(report.read_text())
    assert rep["n_items"] == len(qs) and rep["n_missing"] == 0 and rep["warnings"] == []
    assert rep["average"] == {"composite": 100.0, "exact": 100.0}
    assert set(rep["columns"]) == set(T.COLUMNS)
    assert rep["paper"]["composite"]["Human"]["docking"] == 74.54
    assert rep["paper"]["exact"]["Qwen2.5VL-7B-SFT"]["pocket_ligand_interaction"] == 0.78
    assert rep["paper_average_excludes"] == [T.TRANSLATION_ROTATION, T.ROTATION_ROTATION]
    assert len(rep["items"]) == len(qs) and all(i["composite"] == 1.0 for i in rep["items"])
    with Image.open(plot) as im:
        assert im.format == "PNG" and im.size[0] > 800
    assert not list(files["dir"].glob(".*.tmp"))  # temporary files were renamed


def test_missing_unknown_and_unparsed_are_counted(files, capsys):
    qs = gold_questions()
    rows = [{"id": q.id, "prediction": q.answer} for q in qs[2:]]
    rows[0]["prediction"] = "no idea"  # unparsed
    rows[1]["prediction"] = None  # counts as missing
    rows.append({"id": "not-in-gold", "prediction": "A"})
    pred = write_preds(files["dir"] / "pred.jsonl", rows + [""])
    report = files["dir"] / "r.json"
    rc, out, err = run(capsys, "--gold", files["gold"], "--pred", pred, "--report", report)
    assert rc == 0
    warnings = err.strip().splitlines()
    assert warnings == ["misi-agent: warning: 1 prediction id(s) not in the gold set were ignored: 'not-in-gold'",
                        f"misi-agent: warning: 2 of {len(qs)} gold question(s) have no prediction and score 0"]
    rep = json.loads(report.read_text())
    assert rep["counts"] == {"prediction_lines": len(qs) - 1, "matched": len(qs) - 2, "unknown_ids": 1, "missing": 2,
                             "unparsed": 1}
    assert rep["n_missing"] == 3 and rep["n_unparsed"] == 1  # 2 absent + 1 null; 1 unreadable
    assert rep["columns"][T.TRANSLATION]["composite"] == 0.0
    assert rep["columns"][T.ROTATION]["composite"] == pytest.approx(100 / 3)  # rotation-1 unreadable, -2 null
    assert "missing predictions 3, unparsed 1" in out


@pytest.mark.parametrize("lines,pattern", [
    (['{"id": "translation-1", "prediction": "move x 3"}', "{oops"], r"^misi-agent: error: pred.jsonl:2: malformed JSON"),
    (['{"id": "translation-1", "prediction": "a"}', '{"id": "translation-1", "prediction": "b"}'],
     r"pred.jsonl:2: duplicate prediction id 'translation-1' \(first at pred.jsonl:1\)"),
    (['{"id": "translation-1"}'], r"pred.jsonl:1: missing field 'prediction'"),
    (['{"id": "translation-1", "prediction": 3}'], r"'prediction' of 'translation-1' must be a string or null, got int"),
    (['["translation-1", "move x 3"]'], r"expected a JSON object"),
    (['{"id": "x1", "prediction": "A"}', '{"id": "x2", "prediction": "B"}'], r"none of the 2 prediction ids .* gold set"),
])
def test_bad_predictions_exit_2_with_one_line(files, capsys, lines, pattern):
    import re

    pred = write_preds(files["dir"] / "pred.jsonl", lines)
    report = files["dir"] / "report.json"
    rc, out, err = run(capsys, "--gold", files["gold"], "--pred", pred, "--report", report)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and re.search(pattern, err), err
    assert not report.exists()  # no partial output


def test_bad_inputs_exit_2_with_one_line(files, capsys, tmp_path):
    pred = write_preds(tmp_path / "p.jsonl", [{"id": "translation-1", "prediction": "move x 3"}])
    cases = [
        (["--gold", tmp_path / "missing.jsonl", "--pred", pred], "question file not found"),
        (["--gold", files["gold"], "--pred", tmp_path / "nope.jsonl"], "predictions file not found"),
        (["--gold", files["gold"], "--pred", pred, "--report", tmp_path / "no" / "r.json"], "output folder does not exist"),
        (["--gold", files["gold"], "--pred", pred, "--plot", tmp_path / "no" / "p.png"], "output folder does not exist"),
    ]
    bad_gold = tmp_path / "bad_gold.jsonl"
    rec = gold_questions()[0].to_dict()
    bad_gold.write_text(json.dumps({**rec, "task": "levitation"}) + "\n")
    cases.append((["--gold", bad_gold, "--pred", pred], "bad_gold.jsonl:1: unknown task 'levitation'"))
    bad_answer = tmp_path / "bad_answer.jsonl"
    bad_answer.write_text(json.dumps({**rec, "answer": "sideways"}) + "\n")
    cases.append((["--gold", bad_answer, "--pred", pred], "bad_answer.jsonl:1: gold answer 'sideways'"))
    for argv, needle in cases:
        rc, out, err = run(capsys, *argv)
        assert rc == 2, needle
        assert len(err.strip().splitlines()) == 1 and needle in err and err.startswith("misi-agent: error:"), err


def test_console_entry_point(files, tmp_path):
    qs = gold_questions()
    pred = write_preds(tmp_path / "p.jsonl", [{"id": q.id, "prediction": "A"} for q in qs])
    exe = Path(sys.executable).parent / "misi-agent"
    ok = subprocess.run([str(exe), "bench", "score", "--gold", str(files["gold"]), "--pred", str(pred)],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "Composite score" in ok.stdout
    bad = subprocess.run([str(exe), "bench", "score", "--gold", str(tmp_path / "x.jsonl"), "--pred", str(pred)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
