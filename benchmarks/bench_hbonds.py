"""Speed and coverage of the H-bond engine over real complexes.

Runs ``find_hbonds`` (relaxed and strict) on every complex of a pool, checks that it never
fails and that results are deterministic, and prints the median / p90 time per complex and
bond-count statistics. Loading a complex is not timed.

    python benchmarks/bench_hbonds.py                 # committed fixtures (15 complexes)
    python benchmarks/bench_hbonds.py --pool all      # 308 PoseBusters + 41 PLIP entries
    python benchmarks/bench_hbonds.py --pool all --plot /tmp/hbonds.png
"""
from __future__ import annotations

import argparse
import collections
import csv
import statistics
import time
from pathlib import Path

from tqdm import tqdm

from misi_agent.structure import load_complex
from misi_agent.tools.hbonds import find_hbonds

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "misi_agent" / "data" / "structures"
SHARED = ROOT.parent / "shared" / "data" / "structures"


def entries(pool: str) -> list[tuple[Path, str | None]]:
    """(file, ligand CCD code or None) for the fixtures or the full shared pools."""
    if pool == "fixtures":
        rows = csv.DictReader(open(FIXTURES / "manifest.csv"))
        return [(FIXTURES / r["file"], r["ligand_ccd"] or None) for r in rows]
    out = [(SHARED / "posebusters" / r["file"], r["ligand_ccd"])
           for r in csv.DictReader(open(SHARED / "posebusters" / "manifest.csv"))]
    out += [(f, None) for f in sorted((SHARED / "plip").glob("*.pdb.gz"))]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", choices=["fixtures", "all"], default="fixtures")
    ap.add_argument("--plot", type=Path, help="write histograms of bond counts and times to this PNG")
    args = ap.parse_args()
    times, counts, strict_counts, failures = [], [], [], []
    groups: collections.Counter[str] = collections.Counter()
    for path, code in tqdm(entries(args.pool), desc="complexes"):
        try:
            cx = load_complex(path, code)
        except Exception as exc:          # a structure the loader rejects is not the engine's failure
            failures.append(f"{path.name}: load: {str(exc).splitlines()[0][:120]}")
            continue
        t0 = time.perf_counter()
        bonds = find_hbonds(cx)
        times.append((time.perf_counter() - t0) * 1000.0)
        again = find_hbonds(cx)
        strict = find_hbonds(cx, mode="strict")
        if [b.pair_key for b in bonds] != [b.pair_key for b in again]:
            failures.append(f"{path.name}: non-deterministic")
        if not {(b.pair_key, b.donor) for b in strict} <= {(b.pair_key, b.donor) for b in bonds}:
            failures.append(f"{path.name}: strict bonds not within relaxed")
        counts.append(len(bonds))
        strict_counts.append(len(strict))
        groups.update(b.group for b in bonds)
    print(f"complexes: {len(times)} run, {len(failures)} problems")
    for f in failures:
        print("  ", f)
    if not times:
        return
    q = sorted(times)
    print(f"time per complex (relaxed): median {statistics.median(q):.1f} ms, p90 {q[int(0.9 * (len(q) - 1))]:.1f} ms, "
          f"max {q[-1]:.1f} ms (first call includes table loading); target <= 50 ms median: "
          f"{statistics.median(q) / 50.0:.2f} of budget")
    print(f"bonds relaxed: total {sum(counts)}, mean {statistics.mean(counts):.2f}, median {statistics.median(counts)}, "
          f"max {max(counts)}, complexes without any {counts.count(0)}")
    print(f"bonds strict: total {sum(strict_counts)}, mean {statistics.mean(strict_counts):.2f} "
          f"(strict/relaxed = {sum(strict_counts) / max(1, sum(counts)):.2f})")
    print("most frequent donor/acceptor groups:")
    for g, c in groups.most_common(15):
        print(f"  {c:5d}  {g}")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=(10, 4))
        ax[0].hist([counts, strict_counts], bins=range(0, max(counts) + 2), label=["relaxed", "strict"])
        ax[0].set_xlabel("H-bonds per complex")
        ax[0].legend()
        ax[1].hist(times, bins=40)
        ax[1].set_xlabel("ms per complex")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
