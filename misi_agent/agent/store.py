"""The structure store: find a PDB entry by its ID in local folders (download only on request).

Search order: the folders given with ``--structures`` (repeatable), then the folders in the
``MISI_STRUCTURES`` environment variable (``os.pathsep``-separated), then the repository's
committed fixtures (``misi_agent/data/structures``, the embedded default). Folders are
searched recursively for mmCIF or PDB files, gzipped or not, named after the ID
(``1abc.cif.gz``, ``1ABC.pdb``, ``pdb1abc.ent.gz``, ``1abc_ligand.cif``). A ``manifest.csv``
(columns ``pdb_id``, ``ligand_ccd``, ``file``) in a folder names the file of an entry and
the ligand codes it lists; the agent records those codes but does not use them to choose
the ligand (it sees only what a test taker sees: question text, images, PDB ID).

Downloading from the RCSB is off unless the store is built with ``allow_download=True``
(the CLI's ``--allow-download``); downloads go to a cache folder, written to a temporary
file and renamed, so an interrupted download leaves nothing half-written.
"""
from __future__ import annotations

import csv
import os
import re
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from misi_agent.errors import MisiError

ENV_VAR = "MISI_STRUCTURES"
EMBEDDED_DIR = Path(__file__).resolve().parent.parent / "data" / "structures"
STRUCTURE_SUFFIXES = (".cif", ".mmcif", ".pdb", ".ent")
PDB_ID_RE = re.compile(r"^[0-9][a-z0-9]{3}$")
RCSB_URL = "https://files.rcsb.org/download/{pdb_id}.cif.gz"
DEFAULT_DOWNLOAD_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "misi-agent" / "structures"
DOWNLOAD_TIMEOUT_S = 60


class UnknownStructureError(MisiError):
    """No structure file for the PDB ID in any folder of the store (one-line message)."""


@dataclass(frozen=True)
class StoredStructure:
    """Where an entry's file is. ``ligand_codes`` come from a manifest, if any (recorded only)."""

    pdb_id: str
    path: Path
    ligand_codes: tuple[str, ...] = ()
    origin: str = "local"  # "local" | "embedded" | "download"

    def to_dict(self) -> dict:
        return {"pdb_id": self.pdb_id, "path": str(self.path), "origin": self.origin}


def normalise_pdb_id(pdb_id: str) -> str:
    """Lower-case four-character PDB ID, or MisiError."""
    pid = str(pdb_id).strip().lower()
    if not PDB_ID_RE.match(pid):
        raise MisiError(f"{pdb_id!r} is not a PDB ID (four characters, a digit first)")
    return pid


def _id_of_file(path: Path) -> str | None:
    """The PDB ID a structure file is named after, or None when it is not a structure file."""
    name = path.name.lower().removesuffix(".gz")
    stem = None
    for suffix in STRUCTURE_SUFFIXES:
        if name.endswith(suffix):
            stem = name[: -len(suffix)]
            break
    if stem is None:
        return None
    if stem.startswith("pdb") and len(stem) == 7:
        stem = stem[3:]
    head = re.split(r"[_.\-]", stem, maxsplit=1)[0]
    return head if PDB_ID_RE.match(head) else None


def _rank(path: Path) -> tuple[int, str]:
    """Prefer mmCIF over PDB, then the shorter (plainer) name, for a deterministic pick."""
    name = path.name.lower()
    return (0 if ".cif" in name else 1, f"{len(name):04d}{name}")


@lru_cache(maxsize=64)
def index_folder(folder: str) -> dict[str, tuple[Path, tuple[str, ...]]]:
    """Map PDB ID → (file, manifest ligand codes) for every structure file under ``folder``."""
    root = Path(folder)
    found: dict[str, list[Path]] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            pid = _id_of_file(path)
            if pid:
                found.setdefault(pid, []).append(path)
    index = {pid: (sorted(paths, key=_rank)[0], ()) for pid, paths in found.items()}
    for manifest in sorted(root.rglob("manifest.csv")):
        try:
            with open(manifest, newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh))
        except (OSError, csv.Error, UnicodeDecodeError):
            continue
        for row in rows:
            pid = (row.get("pdb_id") or "").strip().lower()
            if not PDB_ID_RE.match(pid):
                continue
            codes = tuple(c for c in re.split(r"[\s;,]+", (row.get("ligand_ccd") or "").strip().upper()) if c)
            fname = (row.get("file") or "").strip()
            path = manifest.parent / fname if fname else None
            if path is None or not path.is_file():
                path = index.get(pid, (None, ()))[0]
            if path is not None:
                index[pid] = (path, codes)
    return index


class StructureStore:
    """Local folders (plus the embedded fixtures) searched for entries by PDB ID."""

    def __init__(self, dirs: Iterable[str | Path] = (), *, use_env: bool = True, include_embedded: bool = True,
                 allow_download: bool = False, download_dir: str | Path | None = None) -> None:
        folders: list[Path] = [Path(d) for d in dirs]
        for d in folders:
            if not d.is_dir():
                raise MisiError(f"--structures {d}: no such folder")
        if use_env:
            folders += [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p.strip()]
        if include_embedded and EMBEDDED_DIR.is_dir():
            folders.append(EMBEDDED_DIR)
        self.folders: tuple[Path, ...] = tuple(dict.fromkeys(f.resolve() for f in folders if f.is_dir()))
        self.allow_download = allow_download
        self.download_dir = Path(download_dir) if download_dir else DEFAULT_DOWNLOAD_DIR

    def describe(self) -> dict:
        return {"folders": [str(f) for f in self.folders], "allow_download": self.allow_download}

    def find(self, pdb_id: str) -> StoredStructure:
        """The entry's file, searching the folders in order; download only when allowed."""
        pid = normalise_pdb_id(pdb_id)
        for folder in self.folders:
            hit = index_folder(str(folder)).get(pid)
            if hit:
                origin = "embedded" if folder == EMBEDDED_DIR.resolve() else "local"
                return StoredStructure(pid, hit[0], hit[1], origin)
        if self.allow_download:
            cached = self.download_dir / f"{pid}.cif.gz"
            if not cached.is_file():
                download_entry(pid, cached)
            return StoredStructure(pid, cached, (), "download")
        searched = ", ".join(str(f) for f in self.folders) or "no folders"
        raise UnknownStructureError(
            f"no structure file for PDB ID {pid.upper()} (searched {searched}); add a folder with --structures "
            f"or {ENV_VAR}, or pass --allow-download")

    def has(self, pdb_id: str) -> bool:
        try:
            pid = normalise_pdb_id(pdb_id)
        except MisiError:
            return False
        return any(pid in index_folder(str(f)) for f in self.folders)


def download_entry(pdb_id: str, dest: Path, url_template: str = RCSB_URL, timeout: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """Fetch ``{pdb_id}.cif.gz`` from the RCSB into ``dest`` (atomic: temp file, then rename)."""
    pid = normalise_pdb_id(pdb_id)
    url = url_template.format(pdb_id=pid)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{pid}.", suffix=".part", dir=dest.parent)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (https URL)
            while chunk := resp.read(1 << 16):
                out.write(chunk)
        with open(tmp, "rb") as fh:
            if fh.read(2) != b"\x1f\x8b":
                raise MisiError(f"download of {pid.upper()} from {url} did not return a gzip file")
        os.replace(tmp, dest)
    except urllib.error.URLError as exc:
        raise MisiError(f"cannot download {pid.upper()} from {url}: {getattr(exc, 'reason', exc)}") from None
    except OSError as exc:
        raise MisiError(f"cannot download {pid.upper()} from {url}: {exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest
