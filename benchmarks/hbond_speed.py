"""H-bond speed: time per complex of the ChimeraX-compatible engine and of PLIP, in one run.

    python benchmarks/hbond_speed.py [--n 40] [--protonation]

Loads the first ``--n`` PoseBusters entries of /work/shared/data/structures (sorted by PDB
ID, ligand by the manifest's code; falls back to the embedded fixtures), which is not timed,
then times on the same complexes, one after the other in this process:

* ``find_hbonds(cx)`` (relaxed), after one warm-up call that loads the criteria tables;
* ``plip_interactions(cx)`` through one PLIP worker process: writing the PDB input, PLIP
  itself (Open Babel hydrogens, all interaction types), the JSON round trip and mapping the
  atoms back. The worker's start-up (paid once) and a warm-up complex are reported apart.
  PLIP's own in-worker time is printed too;
* optionally ``protonate_pocket(cx)`` (PDBFixer + OpenMM), the cost of ``--protonate``.

Prints median / mean / 90th percentile seconds per complex and the ratio of the medians.
Wall-clock figures: other jobs on the machine slow every engine alike.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from _entries import ROOT, entries  # noqa: E402  (benchmarks/ is on sys.path)


def stats(times: list[float]) -> str:
    a = np.asarray(times)
    return (f"median {np.median(a) * 1000:8.1f} ms   mean {a.mean() * 1000:8.1f} ms   "
            f"p90 {np.percentile(a, 90) * 1000:8.1f} ms   (n={len(a)})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40, help="number of complexes")
    ap.add_argument("--protonation", action="store_true", help="also time protonate_pocket")
    args = ap.parse_args(argv)

    from misi_agent.errors import MisiError
    from misi_agent.structure import load_complex
    from misi_agent.tools.hbonds import find_hbonds
    from misi_agent.tools.plip_tool import PlipWorker, plip_interactions

    complexes = []
    for path, code in tqdm(entries(args.n), desc="loading (not timed)", unit="cx"):
        try:
            complexes.append(load_complex(path, code))
        except MisiError as exc:
            print(f"skipped {path.name}: {exc}", file=sys.stderr)
    if not complexes:
        print("no complex could be loaded", file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    find_hbonds(complexes[0])
    chx_warm = time.perf_counter() - t0
    chx = []
    for cx in tqdm(complexes, desc="ChimeraX-compatible", unit="cx"):
        t0 = time.perf_counter()
        find_hbonds(cx)
        chx.append(time.perf_counter() - t0)

    plip, plip_inner, failed = [], [], 0
    with PlipWorker() as worker:
        t0 = time.perf_counter()
        plip_interactions(complexes[0], worker=worker)  # starts the worker and warms it up
        plip_first = time.perf_counter() - t0
        for cx in tqdm(complexes, desc="PLIP", unit="cx"):
            t0 = time.perf_counter()
            try:
                res = plip_interactions(cx, worker=worker)
            except MisiError as exc:
                failed += 1
                print(f"PLIP failed on {cx.pdb_id}: {exc}", file=sys.stderr)
                continue
            plip.append(time.perf_counter() - t0)
            plip_inner.append(res.seconds)

    prot = []
    if args.protonation:
        from misi_agent.tools.protonation import protonate_pocket
        for cx in tqdm(complexes, desc="protonation", unit="cx"):
            t0 = time.perf_counter()
            try:
                protonate_pocket(cx)
            except MisiError as exc:
                print(f"protonation failed on {cx.pdb_id}: {exc}", file=sys.stderr)
                continue
            prot.append(time.perf_counter() - t0)

    print(f"\nH-bond speed on {len(complexes)} complexes ({complexes[0].pdb_id} ... {complexes[-1].pdb_id})")
    print(f"ChimeraX-compatible find_hbonds : {stats(chx)}   (first call incl. tables: {chx_warm * 1000:.0f} ms)")
    print(f"PLIP, whole tool call           : {stats(plip)}   (worker start + first complex: {plip_first:.2f} s;"
          f" {failed} failed)")
    print(f"PLIP, inside the worker         : {stats(plip_inner)}")
    if prot:
        print(f"protonate_pocket (PDBFixer+OpenMM): {stats(prot)}")
    ratio = statistics.median(plip) / statistics.median(chx)
    print(f"ratio of medians PLIP / ChimeraX-compatible: {ratio:.1f}x")
    if prot:
        print(f"ratio of medians protonation / ChimeraX-compatible: "
              f"{statistics.median(prot) / statistics.median(chx):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
