"""Wall time of an image-only evaluation with ``--jobs N`` against one process, in the same run.

Generates a small question set from the committed fixtures (residue–ligand H-bonds by default: residues fitted to
the views, one of the slow image-only tasks), runs ``eval/image_hbonds.py``'s items
(:func:`run_question`, the ``images`` arm) through :func:`misi_agent.bench.parallel.map_items` with one process and
with ``--jobs``, and prints both wall times, the ratio, and whether every answer is the same. The ratio is bounded by
the machine's cores and by the longest item; spawning the workers costs a few seconds each (they import the stack).

    python benchmarks/eval_jobs_speed.py [--jobs 2] [--per-task 6] [--tasks LIST] [--renderer raster] [--size 512]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "eval"))

from misi_agent.bench.parallel import map_items  # noqa: E402
from misi_agent.bench.question import read_questions  # noqa: E402
from misi_agent.cli import main as cli  # noqa: E402

import image_hbonds  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--per-task", type=int, default=6)
    ap.add_argument("--tasks", default="residue_ligand_interaction")
    ap.add_argument("--renderer", default="raster", choices=("raster", "pymol"))
    ap.add_argument("--size", type=int, default=512)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if cli(["bench", "generate", "--structures", str(REPO / "misi_agent" / "data" / "structures"), "--out",
                str(out), "--tasks", a.tasks, "--per-task", str(a.per_task), "--split", "all", "--renderer",
                a.renderer, "--seed", "0", "--size", str(a.size)]) != 0:
            return 1
        qs = read_questions(out / "questions.jsonl")
        run = partial(image_hbonds.run_question, set_dir=out, renderer=a.renderer, noise=0.0, arms=["images"])
        seconds, answers = {}, {}
        for jobs in (1, a.jobs):
            t0 = time.perf_counter()
            rows = map_items(run, qs, jobs=jobs, desc=f"jobs={jobs}")
            seconds[jobs] = time.perf_counter() - t0
            answers[jobs] = [row["images"]["pred"] for row, _ in rows]
    print(f"{len(qs)} items ({a.tasks}, {a.renderer}, {a.size} px) on {os.cpu_count()} CPUs")
    print(f"one process: {seconds[1]:.1f} s; --jobs {a.jobs}: {seconds[a.jobs]:.1f} s; "
          f"speed-up {seconds[1] / seconds[a.jobs]:.2f}x")
    print("answers the same:", answers[1] == answers[a.jobs])
    return 0


if __name__ == "__main__":
    sys.exit(main())
