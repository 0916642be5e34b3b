"""Speed of the agent: router answers per second on generated H-bond questions, and the cost of
one transformers-planner step with a tiny Qwen2.5-VL built from a config (the loop's overhead
without a real model's compute).

    python benchmarks/agent_speed.py [--per-task 12] [--size 256]

Prints figures and ratios; asserts nothing.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-task", type=int, default=12)
    ap.add_argument("--size", type=int, default=256)
    args = ap.parse_args()

    from agent_support import generate, save_tiny_qwen
    from misi_agent.agent.loop import answer_question
    from misi_agent.agent.planners import make_planner
    from misi_agent.agent.planners.router import RouterPlanner
    from misi_agent.agent.store import StructureStore
    from misi_agent.bench.question import read_questions
    from misi_agent.bench.scoring import score_item

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = generate(Path(tmp) / "set", "residue_ligand_interaction,pocket_ligand_interaction", args.per_task,
                        size=args.size)
        gen_s = time.perf_counter() - t0
        qs = read_questions(path)
        store = StructureStore(use_env=False)
        router = RouterPlanner()
        times, exact = {}, 0
        t0 = time.perf_counter()
        for q in qs:
            t = time.perf_counter()
            r = answer_question(q, path.parent, router, store)
            times.setdefault(q.task, []).append(time.perf_counter() - t)
            exact += score_item(q, r.answer).exact
        total = time.perf_counter() - t0
        print(f"generation: {len(qs)} questions in {gen_s:.1f} s")
        print(f"router: {len(qs)} questions in {total:.2f} s ({len(qs) / total:.1f} q/s), exact {exact}/{len(qs)}")
        for task, ts in times.items():
            print(f"  {task}: median {statistics.median(ts) * 1000:.0f} ms, max {max(ts) * 1000:.0f} ms "
                  f"(first call loads the entry; later ones hit the cache)")

        folder = save_tiny_qwen(Path(tmp) / "tiny", "qwen2_5_vl")
        t = time.perf_counter()
        planner = make_planner(f"transformers:{folder}", max_new_tokens=16, min_pixels=28 * 28 * 4,
                               max_pixels=28 * 28 * 16)
        load_s = time.perf_counter() - t
        n_params = sum(p.numel() for p in planner.model.parameters())
        steps = []
        for q in qs[:3]:
            r = answer_question(q, path.parent, planner, store, max_turns=1)
            steps.append(r.trace.steps[0])
        ms = [s.planner_seconds * 1000 for s in steps]
        print(f"tiny Qwen2.5-VL ({n_params / 1e3:.0f}k params): load {load_s:.1f} s; one step (6 images, "
              f"{steps[0].info['prompt_tokens']} prompt tokens, {steps[0].info['new_tokens']} new) "
              f"median {statistics.median(ms):.0f} ms")


if __name__ == "__main__":
    main()
