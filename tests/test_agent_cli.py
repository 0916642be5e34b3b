"""``misi-agent answer`` and ``misi-agent run``: outputs, one-line failures, resume after a crash."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_support import generate, read_jsonl
from misi_agent.agent import loop
from misi_agent.bench.question import read_questions
from misi_agent.bench.scoring import score_item
from misi_agent.cli import main


@pytest.fixture(scope="module")
def qset(tmp_path_factory):
    path = generate(tmp_path_factory.mktemp("bench") / "hb", "residue_ligand_interaction,pocket_ligand_interaction", 4)
    return path, read_questions(path)


def qfile(path: Path, q) -> Path:
    return path.parent / Path(q.images[0]).parent / "question.json"


def test_answer_prints_the_answer_and_json_and_trace(qset, tmp_path, capsys):
    path, qs = qset
    q = next(q for q in qs if q.task == "pocket_ligand_interaction")
    assert main(["answer", str(qfile(path, q))]) == 0
    printed = capsys.readouterr().out.strip()
    assert score_item(q, printed).exact and "\n" not in printed
    trace = tmp_path / "trace.json"
    assert main(["answer", str(qfile(path, q)), "--json", "--trace", str(trace), "--planner", "router"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["answer"] == printed and obj["task"] == q.task and obj["error"] is None
    assert [c["name"] for c in obj["tool_calls"]] == ["pocket_hbonds"] and obj["tool_calls"][0]["ok"]
    assert obj["tool_calls"][0]["arguments"]["pdb_id"] == q.meta["pdb_id"].lower()
    saved = json.loads(trace.read_text())
    assert saved["answer"] == printed and saved["steps"][0]["results"][0]["output"]["answer"] == printed
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]  # no temporary file left


def test_bad_input_is_one_line_and_exit_2(qset, tmp_path, capsys):
    path, qs = qset
    good = str(qfile(path, qs[0]))
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"id": "x", "task": ')
    cases = [
        ["answer", str(tmp_path / "missing.json")],
        ["answer", str(bad_json)],
        ["answer", good, "--planner", "magic"],
        ["answer", good, "--planner", "transformers:" + str(tmp_path)],
        ["answer", good, "--structures", str(tmp_path / "nope")],
        ["answer", good, "--trace", str(tmp_path / "no" / "t.json")],
        ["answer", good, "--max-turns", "0"],
        ["run", str(path), "--out", str(tmp_path / "no" / "p.jsonl")],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("misi-agent: error: ") and err.count("\n") == 1, (argv, err)
    # the installed console script: no traceback either
    exe = Path(sys.executable).parent / "misi-agent"
    proc = subprocess.run([str(exe), "answer", str(bad_json)], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_unknown_structure_is_no_answer_exit_1(qset, tmp_path, capsys):
    path, qs = qset
    q = qs[0]
    folder = tmp_path / "item"
    shutil.copytree(qfile(path, q).parent, folder)
    obj = json.loads((folder / "question.json").read_text())
    obj["question"] = obj["question"].replace(q.meta["pdb_id"].upper(), "9ZZZ")
    (folder / "question.json").write_text(json.dumps(obj))
    assert main(["answer", str(folder / "question.json")]) == 1
    err = capsys.readouterr().err
    assert "no structure file for PDB ID 9ZZZ" in err and err.count("\n") == 1


def test_run_resumes_after_a_crash_with_one_prediction_per_question(qset, tmp_path, monkeypatch, capsys):
    path, qs = qset
    out = tmp_path / "pred.jsonl"
    real = loop.answer_question
    calls = {"n": 0}

    def crashing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt  # the process is killed while answering the 4th question
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "answer_question", crashing)
    assert main(["run", str(path), "--out", str(out)]) == 130
    first = out.read_text()
    assert len(first.splitlines()) == 3
    with open(out, "a") as fh:  # and the crash left half a line behind
        fh.write('{"id": "' + qs[3].id + '", "task": "resid')
    monkeypatch.setattr(loop, "answer_question", real)
    traces = tmp_path / "traces"
    traces.mkdir()
    assert main(["run", str(path), "--out", str(out), "--trace", str(traces)]) == 0
    assert "already in pred.jsonl" in capsys.readouterr().err
    text = out.read_text()
    assert text.startswith(first) and text.endswith("\n")
    rows = read_jsonl(out)
    assert sorted(r["id"] for r in rows) == sorted(q.id for q in qs)  # each exactly once
    by_id = {q.id: q for q in qs}
    for r in rows:
        assert r["error"] is None and score_item(by_id[r["id"]], r["prediction"]).exact
    assert len(list(traces.iterdir())) == len(qs) - 3
    # a third run has nothing left to do and changes nothing
    assert main(["run", str(path), "--out", str(out)]) == 0
    assert out.read_text() == text
    # the scorer reads the file
    assert main(["bench", "score", "--gold", str(path), "--pred", str(out)]) == 0


def test_run_records_item_errors_and_goes_on(qset, tmp_path, capsys):
    path, qs = qset
    rows = read_jsonl(path)
    rows[0]["images"][2] = "items/missing.png"
    rows[1]["question"] = rows[1]["question"].replace(rows[1]["meta"]["pdb_id"].upper(), "9ZZZ")
    broken = path.parent / "broken.jsonl"
    broken.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "pred.jsonl"
    assert main(["run", str(broken), "--out", str(out)]) == 0
    got = {r["id"]: r for r in read_jsonl(out)}
    assert len(got) == len(rows)
    assert got[rows[0]["id"]]["prediction"] is None and "not found" in got[rows[0]["id"]]["error"]
    assert got[rows[1]["id"]]["prediction"] is None and "9ZZZ" in got[rows[1]["id"]]["error"]
    assert all(got[r["id"]]["prediction"] for r in rows[2:])
    # a damaged line in the middle is not silently dropped
    lines = out.read_text().splitlines()
    lines[1] = lines[1][:20]
    out.write_text("\n".join(lines) + "\n")
    assert main(["run", str(broken), "--out", str(out)]) == 2
    assert "damaged" in capsys.readouterr().err
