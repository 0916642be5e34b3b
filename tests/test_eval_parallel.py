"""--jobs in the image-only evaluations (misi_agent.bench.parallel): worker processes give the serial run's results."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from misi_agent.bench.parallel import JobsError, map_items
from misi_agent.bench.question import read_questions

from agent_support import generate

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "eval"))


def _without_times(record: dict) -> dict:
    return {k: v for k, v in record.items() if "second" not in k}


def test_image_grounding_gives_the_same_results_with_two_workers(tmp_path):
    """Translation and zooming items of the fixture entries, image-only, answered in one process and in two
    workers: every item's answer, score and evidence (all but the timings) and every reconstruction's quality
    are the same, in the same order."""
    import image_grounding

    qpath = generate(tmp_path / "set", "translation,zooming", 2, seed=3, size=384)
    out = {}
    for jobs in (1, 2):
        out[jobs] = tmp_path / f"out{jobs}"
        assert image_grounding.main([str(qpath), "--label", "t", "--out", str(out[jobs]), "--jobs", str(jobs)]) == 0
    one, two = (json.loads((out[j] / "image_grounding_t.json").read_text()) for j in (1, 2))
    assert [r["id"] for r in one["items"]] == [q.id for q in read_questions(qpath)]
    assert [_without_times(r) for r in one["items"]] == [_without_times(r) for r in two["items"]]
    assert [_without_times(r) for r in one["reconstructions"]] == [_without_times(r) for r in two["reconstructions"]]
    assert one["items"][0]["prediction"]  # the items were answered, not failed alike
    assert all(r["status"] == "ok" for r in one["items"]), one["items"]


def test_an_item_that_fails_in_a_worker_stops_the_run_with_its_error(tmp_path):
    """A T4 item whose pictures were deleted: eval/image_hbonds.py's per-item function raises the missing file's
    error from the worker, as the serial loop would, instead of returning rows for the other items."""
    from functools import partial

    import image_hbonds

    qpath = generate(tmp_path / "set", "residue_ligand_interaction", 2, seed=1, size=256)
    qs = read_questions(qpath)
    shutil.rmtree(qpath.parent / "items" / qs[1].id)
    run = partial(image_hbonds.run_question, set_dir=qpath.parent, renderer="raster", noise=0.0, arms=["images"])
    with pytest.raises(FileNotFoundError, match=qs[1].id):
        map_items(run, qs, jobs=2)


def test_jobs_below_one_is_refused(tmp_path, capsys):
    import image_hbonds

    with pytest.raises(JobsError, match="--jobs must be 1 or more, got 0"):
        map_items(len, ["ab", "c"], jobs=0)
    with pytest.raises(SystemExit) as exc:
        image_hbonds.main(["--set", str(tmp_path), "--renderer", "raster", "--jobs", "0"])
    assert exc.value.code == 2
    assert "--jobs must be 1 or more, got 0" in capsys.readouterr().err
