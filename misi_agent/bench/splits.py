"""Structure pools and the deterministic train / test / heldout split.

Where the benchmark's complexes come from, and which split each one belongs to:

* **Pools.** ``posebusters``: entries with a known ligand of interest (a CCD code in
  ``manifest.csv``). ``plip``: entries without one (the ligand is picked automatically,
  :func:`misi_agent.structure.select_ligand`); this pool is held out.
* **Split (ours).** A ``posebusters`` entry is ``train`` or ``test`` by a hash of its PDB ID
  (SHA-256 of ``"misi-split:" + pdb_id``; the first 32 bits below 80 % of the range mean
  ``train``), so the split never depends on the order of files, the seed or the machine.
  Every ``plip`` entry is ``heldout``; a PDB ID found in the ``plip`` pool is held out
  everywhere (its ``posebusters`` copy is dropped), so held-out entries never reach train.

:func:`discover` reads a ``--structures`` directory:

* a directory with ``manifest.csv`` (columns ``pdb_id``, ``ligand_ccd``, ``file`` and an
  optional ``pool``): rows with a ligand code are ``posebusters``, rows without one ``plip``
  unless ``pool`` says otherwise;
* a directory of plain structure files (``.cif``/``.pdb``/``.ent``, optionally ``.gz``)
  without a manifest: every file is a ``plip``-pool entry (no ligand code);
* a directory whose sub-directories are either of the above (e.g.
  ``/work/shared/data/structures`` with ``posebusters/`` and ``plip/``).
"""
from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

from misi_agent.errors import MisiError
from misi_agent.structure import pdb_id_from_path

SPLITS = ("train", "test", "heldout")
SPLIT_CHOICES = SPLITS + ("all",)
POOLS = ("posebusters", "plip")
TRAIN_FRACTION = 0.8
_STRUCTURE_SUFFIXES = (".cif", ".mmcif", ".pdb", ".ent")


class PoolError(MisiError):
    """A ``--structures`` directory that cannot be read as a pool (one-line message)."""


@dataclass(frozen=True)
class Entry:
    """One structure the generator may use: where it is, which ligand, which pool and split."""

    pdb_id: str
    path: Path
    ligand_code: str | None
    pool: str
    split: str


def hash_split(pdb_id: str, train_fraction: float = TRAIN_FRACTION) -> str:
    """``train`` or ``test`` from a hash of the (lower-case) PDB ID, about 80 / 20."""
    digest = hashlib.sha256(f"misi-split:{pdb_id.lower()}".encode()).hexdigest()
    return "train" if int(digest[:8], 16) < train_fraction * 2**32 else "test"


def split_of(pdb_id: str, pool: str) -> str:
    """The split of an entry: ``heldout`` for the PLIP pool, else the hash split."""
    if pool not in POOLS:
        raise PoolError(f"unknown pool {pool!r} (expected one of {', '.join(POOLS)})")
    return "heldout" if pool == "plip" else hash_split(pdb_id)


def _is_structure(path: Path) -> bool:
    return path.is_file() and path.name.lower().removesuffix(".gz").endswith(_STRUCTURE_SUFFIXES)


def _read_manifest(directory: Path) -> list[tuple[str, Path, str | None, str]]:
    manifest = directory / "manifest.csv"
    try:
        with manifest.open(newline="") as fh:
            reader = csv.DictReader(fh)
            missing = {"pdb_id", "file"} - set(reader.fieldnames or ())
            if missing:
                raise PoolError(f"{manifest}: missing column(s) {', '.join(sorted(missing))}")
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise PoolError(f"{manifest}: unreadable ({type(exc).__name__})") from None
    out = []
    for n, row in enumerate(rows, start=2):
        pdb_id = (row.get("pdb_id") or "").strip().lower()
        fname = (row.get("file") or "").strip()
        if not pdb_id or not fname:
            raise PoolError(f"{manifest}:{n}: empty pdb_id or file")
        path = directory / fname
        if not path.is_file():
            raise PoolError(f"{manifest}:{n}: {fname} does not exist")
        code = (row.get("ligand_ccd") or "").strip().upper() or None
        pool = (row.get("pool") or "").strip().lower() or ("posebusters" if code else "plip")
        if pool not in POOLS:
            raise PoolError(f"{manifest}:{n}: unknown pool {pool!r} (expected one of {', '.join(POOLS)})")
        out.append((pdb_id, path, code, pool))
    return out


def _read_plain(directory: Path) -> list[tuple[str, Path, str | None, str]]:
    return [(pdb_id_from_path(p), p, None, "plip") for p in sorted(directory.iterdir()) if _is_structure(p)]


def _read_dir(directory: Path) -> list[tuple[str, Path, str | None, str]]:
    if (directory / "manifest.csv").is_file():
        return _read_manifest(directory)
    return _read_plain(directory)


def discover(directory: str | Path) -> list[Entry]:
    """Every usable entry under ``directory`` with its pool and split, sorted by (pool, PDB ID).

    Raises :class:`PoolError` when the directory does not exist or holds no structure.
    """
    root = Path(directory)
    if not root.is_dir():
        raise PoolError(f"{root}: no such directory")
    raw = _read_dir(root)
    if not raw:
        for sub in sorted(p for p in root.iterdir() if p.is_dir()):
            raw.extend(_read_dir(sub))
    if not raw:
        raise PoolError(f"{root}: no manifest.csv and no structure files (.cif/.pdb/.ent, optionally .gz)")
    heldout_ids = {pid for pid, _, _, pool in raw if pool == "plip"}
    seen: set[tuple[str, str]] = set()
    entries = []
    for pid, path, code, pool in raw:
        if pool == "posebusters" and pid in heldout_ids:
            continue  # held out everywhere
        if (pool, pid) in seen:
            continue  # first row wins for a repeated PDB ID
        seen.add((pool, pid))
        entries.append(Entry(pid, path, code, pool, split_of(pid, pool)))
    return sorted(entries, key=lambda e: (POOLS.index(e.pool), e.pdb_id))


def select(entries: list[Entry], split: str) -> list[Entry]:
    """The entries of one split (``all``: every entry)."""
    if split not in SPLIT_CHOICES:
        raise PoolError(f"unknown split {split!r} (expected one of {', '.join(SPLIT_CHOICES)})")
    return list(entries) if split == "all" else [e for e in entries if e.split == split]
