"""The structures the speed scripts run on: real PoseBusters entries, or the embedded fixtures.

Shared by the scripts in ``benchmarks/`` (run as ``python benchmarks/NAME.py``, so this folder
is on ``sys.path``).
"""
from __future__ import annotations

import csv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POSEBUSTERS = Path("/work/shared/data/structures/posebusters")
FIXTURES = ROOT / "misi_agent" / "data" / "structures"


def entries(n: int, with_ligand: bool = False) -> list[tuple[Path, str | None]]:
    """(file, ligand CCD) of the first ``n`` PoseBusters entries by PDB ID, or of the fixtures.

    ``with_ligand`` keeps only entries whose manifest names a ligand code.
    """
    for folder in (POSEBUSTERS, FIXTURES):
        manifest = folder / "manifest.csv"
        if manifest.is_file():
            with manifest.open() as fh:
                rows = sorted(csv.DictReader(fh), key=lambda r: r["pdb_id"])
            out = [(folder / r["file"], (r.get("ligand_ccd") or "").strip() or None) for r in rows
                   if (folder / r["file"]).is_file()]
            if with_ligand:
                out = [e for e in out if e[1]]
            if out:
                return out[:n]
    raise SystemExit("no structures found (neither PoseBusters nor fixtures)")
