"""Generation speed: how long ``bench generate`` takes for N items per task.

    python benchmarks/generate_speed.py [--per-task 50] [--renderer raster] [--split test]
        [--structures /work/shared/data/structures/posebusters] [--tasks all] [--shards 1]
        [--out DIR] [--plot speed.png]

Generates into a fresh folder (a temporary one unless ``--out``) and prints wall time,
items and images per second, seconds per item of every task (building + rendering +
writing, from the generator's own timing) and the ratio to the target (450 items, i.e.
50 per task, in 10 minutes). With ``--shards K`` the K shards run as K processes at the
same time (they merge by themselves) and the wall time is that of the whole batch. Falls
back to the embedded fixtures when the PoseBusters folder is absent. With ``--plot`` a bar
chart of seconds per item by task is written.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POSEBUSTERS = Path("/work/shared/data/structures/posebusters")
FIXTURES = ROOT / "misi_agent" / "data" / "structures"
TARGET_S_PER_450 = 600.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-task", type=int, default=50)
    ap.add_argument("--renderer", default="raster")
    ap.add_argument("--split", default="test")
    ap.add_argument("--structures", default=str(POSEBUSTERS if POSEBUSTERS.is_dir() else FIXTURES))
    ap.add_argument("--tasks", default="all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--out", default=None)
    ap.add_argument("--plot", default=None)
    args = ap.parse_args()

    from misi_agent.bench.generate import generate, parse_tasks
    from misi_agent.bench.question import read_questions

    tasks = parse_tasks(args.tasks)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="misi-gen-speed-")) / "out"
    t0 = time.perf_counter()
    task_seconds: dict[str, float] = {}
    if args.shards == 1:
        s = generate(args.structures, out, tasks=tasks, per_task=args.per_task, split=args.split,
                     renderer=args.renderer, seed=args.seed, progress=True)
        task_seconds = s.task_seconds
    else:
        procs = [subprocess.Popen([sys.executable, "-m", "misi_agent.cli", "bench", "generate", "--structures",
                                   args.structures, "--out", str(out), "--tasks", ",".join(tasks), "--per-task",
                                   str(args.per_task), "--split", args.split, "--renderer", args.renderer, "--seed",
                                   str(args.seed), "--shard", f"{i}/{args.shards}", "--no-progress"])
                 for i in range(1, args.shards + 1)]
        if any(p.wait() != 0 for p in procs):
            print("a shard failed", file=sys.stderr)
            return 1
    wall = time.perf_counter() - t0
    qs = read_questions(out / "questions.jsonl")
    n_items, n_images = len(qs), sum(len(q.images) for q in qs)
    print(f"\nstructures {args.structures}, split {args.split}, renderer {args.renderer}, shards {args.shards}")
    print(f"{n_items} items, {n_images} images in {wall:.1f} s wall: {n_items / wall:.2f} items/s, "
          f"{n_images / wall:.2f} images/s")
    projected = wall / n_items * 450
    print(f"projected time for 450 items (50 per task): {projected:.0f} s; target 600 s; "
          f"ratio target/projected = {TARGET_S_PER_450 / projected:.2f}")
    if task_seconds:
        print("seconds per item by task (build + render + write):")
        counts = {t: sum(q.task == t for q in qs) for t in tasks}
        for t in tasks:
            if counts[t]:
                print(f"  {t:28s} {task_seconds.get(t, 0.0) / counts[t]:6.2f}")
        if args.plot:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(8, 3.5))
            names = [t for t in tasks if counts[t]]
            ax.bar(range(len(names)), [task_seconds.get(t, 0.0) / counts[t] for t in names], color="#6a8fd8")
            ax.set_xticks(range(len(names)), [t.replace("_", "\n") for t in names], fontsize=7)
            ax.set_ylabel("seconds per item")
            ax.set_title(f"bench generate, {args.renderer} renderer ({n_items} items, {wall:.0f} s wall)")
            fig.tight_layout()
            fig.savefig(args.plot, dpi=120)
            print(f"plot: {args.plot}")
    print(json.dumps({"items": n_items, "images": n_images, "wall_s": round(wall, 1), "renderer": args.renderer,
                      "shards": args.shards}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
