"""Rendering speed: images per second of the raster and PyMOL backends on real pockets.

    python benchmarks/render_speed.py [--n 20] [--size 512] [--views front]

Loads the first ``--n`` PoseBusters entries of
/work/shared/data/structures/posebusters/manifest.csv (sorted by PDB ID; falls back to the
embedded fixtures in misi_agent/data/structures), builds their scenes in the given views
(loading is not timed) and times ``render_many`` on the whole batch for each backend in
this one process. Figures printed:

* raster: images in memory, label cache cleared first (cold), and again with PNG encoding
  (what a task generator pays to write the files); also per CPU second of this process,
  which does not change when other jobs share the machine;
* pymol: the PyMOL worker's start-up is paid once by a warm-up image and reported
  separately; the batch figure is warm (PNG written by the worker and read back);
* the ratio raster (with PNG) / pymol (warm).

If the PyMOL backend cannot be imported or started, its row says why and no ratio is printed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from _entries import ROOT, entries  # noqa: E402  (benchmarks/ is on sys.path)


def load_scenes(n: int, views: list[str]):
    from misi_agent.errors import MisiError
    from misi_agent.scene import scene_from_complex
    from misi_agent.structure import load_complex

    scenes, skipped = [], []
    for path, code in tqdm(entries(n), desc="loading pockets", unit="entry"):
        try:
            cx = load_complex(path, code)
        except MisiError as exc:
            skipped.append(f"{path.name}: {exc}")
            continue
        scenes.extend(scene_from_complex(cx, v) for v in views)
    return scenes, skipped


def time_batch(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def cpu_batch(fn) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process, result)."""
    c0 = time.process_time()
    wall, result = time_batch(fn)
    return wall, time.process_time() - c0, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20, help="number of entries (default 20)")
    parser.add_argument("--size", type=int, default=512, help="image size in pixels (default 512)")
    parser.add_argument("--views", default="front", help="comma-separated views per entry (default front)")
    args = parser.parse_args(argv)
    views = [v.strip() for v in args.views.split(",") if v.strip()]

    print(f"load average before timing (1 min): {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
          "(wall-clock figures below slow down when other jobs share the CPUs)")
    scenes, skipped = load_scenes(args.n, views)
    for s in skipped:
        print(f"skipped {s}")
    atoms = np.array([len(s) for s in scenes])
    print(f"{len(scenes)} images of {len(scenes) // len(views)} pockets at {args.size}x{args.size}; "
          f"atoms per scene: median {int(np.median(atoms))}, range {atoms.min()}-{atoms.max()}")

    from misi_agent.render.base import get_renderer
    from misi_agent.render.raster import label_sprite

    raster = get_renderer("raster")
    label_sprite.cache_clear()
    t_raster, cpu_raster, renders = cpu_batch(lambda: raster.render_many(scenes, args.size))
    t_png, _ = time_batch(lambda: [r.png_bytes() for r in renders])
    raster_ips = len(scenes) / t_raster
    raster_png_ips = len(scenes) / (t_raster + t_png)
    print(f"raster: {raster_ips:8.1f} images/s  ({1000 * t_raster / len(scenes):.1f} ms/image, cold label cache)")
    print(f"raster: {raster_png_ips:8.1f} images/s  including PNG encoding ({1000 * t_png / len(scenes):.1f} ms/image)")
    print(f"raster: {len(scenes) / cpu_raster:8.1f} images per CPU second (independent of other jobs' load)")

    pymol_ips = None
    try:
        pymol = get_renderer("pymol")
    except Exception as exc:  # not written yet, or PyMOL missing: say so and go on
        print(f"pymol:  not available ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
    else:
        try:
            t_start, _ = time_batch(lambda: pymol.render_many(scenes[:1], args.size))
            t_pymol, _ = time_batch(lambda: pymol.render_many(scenes, args.size))
            pymol_ips = len(scenes) / t_pymol
            print(f"pymol:  {pymol_ips:8.1f} images/s  ({1000 * t_pymol / len(scenes):.1f} ms/image, warm worker; "
                  f"start-up + first image {t_start:.1f} s)")
        except Exception as exc:
            print(f"pymol:  failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
        finally:
            close = getattr(pymol, "close", None)
            if callable(close):
                close()
    if pymol_ips:
        print(f"ratio raster/pymol: {raster_png_ips / pymol_ips:.1f}x (raster with PNG encoding vs warm PyMOL)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
