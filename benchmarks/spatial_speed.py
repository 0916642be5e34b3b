"""Speed of the spatial tools: seconds per item per geometric task (target: median < 1 s).

    python benchmarks/spatial_speed.py [--n 12] [--renderer raster] [--size 512]
    python benchmarks/spatial_speed.py --questions Q.jsonl --structures DIR [--n 12]

Default: ``--n`` items per task are made with the benchmark's item generators from the
first ``--n`` entries of /work/shared/data/structures/posebusters (the embedded fixtures if
absent), drawn with ``--renderer`` (not timed), and each solver of
:mod:`misi_agent.tools.geometric_tasks` is timed on its item with the complex already loaded:
wall seconds and CPU seconds of this process (CPU time does not change when other jobs
share the machine). With ``--questions`` the agent tools are timed instead on the first
``--n`` questions per task of a generated set, *including* finding and loading the
structure and choosing the ligand (what one agent tool call costs; the first load of a
process also pays for reading the CCD).

Printed per task: median, mean and max wall seconds, median CPU seconds, and the ratio of the
median to the 1 s target.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

import _entries  # noqa: E402  (benchmarks/ is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET_S = 1.0
TASKS = ("translation", "rotation", "zooming", "translation_rotation", "rotation_rotation", "docking",
         "interaction_location")


def entries(n: int) -> list[tuple[Path, str]]:
    """The first ``n`` + 4 entries with a ligand code (a few spare for tasks an entry cannot make)."""
    return _entries.entries(n + 4, with_ligand=True)


def make_items(n: int, renderer_name: str, size: int):
    """(task, solver call) pairs with everything but the solve done."""
    from misi_agent.bench import task_geometry as G
    from misi_agent.bench import task_hbonds as H
    from misi_agent.bench.items import NotApplicable
    from misi_agent.render.base import get_renderer
    from misi_agent.structure import StructureError, load_complex
    from misi_agent.tools import geometric_tasks as S

    cxs = []
    for path, code in entries(n):
        try:
            cxs.append(load_complex(path, ligand=code))
        except StructureError:
            continue
    renderer = get_renderer(renderer_name)
    items = []
    try:
        for task in TASKS:
            made = 0
            for k, cx in enumerate(cxs):
                if made >= n:
                    break
                rng = np.random.default_rng([17, k, TASKS.index(task)])
                try:
                    if task == "translation":
                        spec, solve = G.translation(cx, rng), (lambda ims, cx=cx: S.solve_translation(ims, cx))
                    elif task == "rotation":
                        spec, solve = G.rotation(cx, rng), (lambda ims, cx=cx: S.solve_rotation(ims, cx))
                    elif task == "zooming":
                        spec, solve = G.zooming(cx, rng), (lambda ims, cx=cx: S.solve_zoom(ims, cx))
                    elif task == "translation_rotation":
                        tg = cxs[(k + 1) % len(cxs)]
                        spec = G.translation_rotation(cx, tg, rng)
                        solve = lambda ims, cx=cx, tg=tg: S.solve_translation_rotation(ims, cx, tg)  # noqa: E731
                    elif task == "rotation_rotation":
                        spec, solve = G.rotation_rotation(cx, rng), (lambda ims, cx=cx: S.solve_rotation_rotation(ims, cx))
                    elif task == "docking":
                        spec, solve = G.docking(cx, rng), (lambda ims, cx=cx: S.solve_docking(ims, cx))
                    else:
                        spec = H.interaction_location(cx, rng)
                        b = spec.params["bond"]
                        bond = {"chain": b["chain"], "residue_name": b["residue_name"],
                                "residue_number": f"{b['residue_number']}{b['insertion_code']}",
                                "residue_atom": b["protein_atom"], "ligand_atom": b["ligand_atom"]}
                        solve = (lambda ims, cx=cx, bond=bond, opts=spec.options: S.locate_interaction(ims, cx, bond, opts))
                except NotApplicable:
                    continue
                images = [r.image for r in renderer.render_many([im.scene for im in spec.images], size)]
                items.append((task, solve, images, spec.answer))
                made += 1
    finally:
        close = getattr(renderer, "close", None)
        if callable(close):
            close()
    return items


def time_solvers(items) -> dict[str, list[tuple[float, float, bool]]]:
    out: dict[str, list[tuple[float, float, bool]]] = {}
    for task, solve, images, gold in tqdm(items, desc="solving", unit="item"):
        w0, c0 = time.perf_counter(), time.process_time()
        got = solve(images)
        out.setdefault(task, []).append((time.perf_counter() - w0, time.process_time() - c0, got.answer == gold))
    return out


def time_tools(questions_path: Path, structures: list[str], n: int) -> dict[str, list[tuple[float, float, bool]]]:
    from misi_agent.agent.context import AgentContext
    from misi_agent.agent.details import read_details
    from misi_agent.agent.planners.router import first_call
    from misi_agent.agent.registry import Registry
    from misi_agent.agent.store import StructureStore
    from misi_agent.bench.question import read_questions
    from misi_agent.tools.agent_tools import agent_tools

    store = StructureStore(structures, use_env=False, include_embedded=False)
    qs = read_questions(questions_path)
    out: dict[str, list[tuple[float, float, bool]]] = {}
    picked = [q for t in TASKS for q in [q for q in qs if q.task == t][:n]]
    for q in tqdm(picked, desc="tool calls", unit="item"):
        images = q.image_paths(questions_path.parent)
        registry = Registry(agent_tools(AgentContext(images, store)))
        name, args = first_call(q.task, read_details(q.question), len(images))
        w0, c0 = time.perf_counter(), time.process_time()
        res = registry.call(name, args)
        ok = bool(res.ok and res.output.get("answer") == q.answer)
        out.setdefault(q.task, []).append((time.perf_counter() - w0, time.process_time() - c0, ok))
    return out


def report(times: dict[str, list[tuple[float, float, bool]]], what: str) -> None:
    print(f"\n{what}: seconds per item (target median < {TARGET_S:g} s)")
    print(f"{'task':22s} {'n':>3s} {'median':>7s} {'mean':>7s} {'max':>7s} {'cpu med':>8s} {'med/target':>10s} {'right':>6s}")
    for task in TASKS:
        rows = times.get(task)
        if not rows:
            continue
        wall = [r[0] for r in rows]
        cpu = [r[1] for r in rows]
        med = statistics.median(wall)
        print(f"{task:22s} {len(rows):3d} {med:7.2f} {statistics.fmean(wall):7.2f} {max(wall):7.2f} "
              f"{statistics.median(cpu):8.2f} {med / TARGET_S:10.2f} {sum(r[2] for r in rows):3d}/{len(rows)}")
    allw = [r[0] for rows in times.values() for r in rows]
    print(f"{'all':22s} {len(allw):3d} {statistics.median(allw):7.2f} {statistics.fmean(allw):7.2f} {max(allw):7.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=12, help="items per task")
    ap.add_argument("--renderer", default="raster", choices=("raster", "pymol"))
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--questions", default=None, help="time the agent tools on this generated questions.jsonl")
    ap.add_argument("--structures", action="append", default=[], help="structure folder(s) for --questions")
    args = ap.parse_args(argv)
    if args.questions:
        if not args.structures:
            raise SystemExit("--questions needs --structures")
        report(time_tools(Path(args.questions), args.structures, args.n), "agent tool calls (incl. structure loading)")
        return 0
    items = make_items(args.n, args.renderer, args.size)
    report(time_solvers(items), f"solvers on {args.renderer} images at {args.size} px (complex loaded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
