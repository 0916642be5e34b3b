"""PLIP 3.0.1 as a tool: every protein–ligand interaction PLIP finds, as this project's types.

PLIP (Adasme et al., NAR 2021) adds polar hydrogens with Open Babel and reports hydrogen
bonds, hydrophobic contacts, π-stacking, π-cation interactions, salt bridges, halogen
bonds, water bridges and metal complexes. Open Babel must never load in this process
(its plugins crash RDKit), so PLIP runs in a worker process (``plip_worker.py``, started
as a plain script) and answers in JSON; this module owns the input it writes and the
typed results it returns.

What PLIP sees: the entry's whole first model (heavy atoms, first alternate location,
waters, metals, cofactors), written as a PDB file with LINK, MODRES and CONECT records
derived from the entry's bonds, i.e. what PLIP would read from the wwPDB's PDB-format file.
The whole model (not just the 10 Å pocket) keeps PLIP's hydrogen placement honest: a
pocket fragment would give Open Babel artificial chain ends inside the binding site. The
ligand of interest is found by its atoms (PDB serial numbers), not by name, so one copy
among several, or a ligand covalently linked into a PLIP composite, is identified exactly;
interactions of other members of a composite are dropped. Atoms come back as PDB serial
numbers and are mapped to atom names and to indices of ``cx.pocket`` / ``cx.ligand``;
coordinates PLIP reports are checked against ours.
"""
from __future__ import annotations

import atexit
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

import numpy as np
import biotite.structure as struc
import biotite.structure.info as info

from misi_agent.errors import MisiError
from misi_agent.structure import Complex, ResidueKey, read_atoms

TOOL_NAME = "plip_interactions"
TOOL_DESCRIPTION = ("All non-covalent protein–ligand interactions PLIP 3.0.1 detects for the ligand of interest: "
                    "hydrogen bonds, hydrophobic contacts, pi-stacking, pi-cation, salt bridges, halogen bonds, "
                    "water bridges and metal complexes, with residue and atom names.")
TOOL_INPUTS = {"structure": "path to an mmCIF/PDB entry", "ligand": "CCD code of the ligand (optional)"}

DEFAULT_TIMEOUT = 300.0
STARTUP_TIMEOUT = 120.0
MAX_PDB_ATOMS = 99_999
REGION_CUTOFF = 25.0  # Å around the ligand kept when the whole model does not fit a PDB file
_CHAIN_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_WORKER_SCRIPT = Path(__file__).with_name("plip_worker.py")
_WATER = frozenset({"HOH", "WAT", "DOD", "H2O"})


class PlipError(MisiError):
    """PLIP could not run or answer for a complex (one-line message)."""


# ----------------------------------------------------------------------------- result types


@dataclass(frozen=True)
class _ResidueFields:
    """The protein residue an interaction involves (the first four fields of every result type)."""

    residue_name: str
    residue_number: int
    insertion_code: str
    chain: str


@dataclass(frozen=True)
class PlipHBond(_ResidueFields):
    """A PLIP hydrogen bond. ``distance`` is D···A, ``h_distance`` H···A (Open Babel's H)."""

    protein_atom: str
    ligand_atom: str
    donor: str  # "protein" | "ligand"
    donor_atom: str
    acceptor_atom: str
    distance: float
    h_distance: float
    angle: float  # D–H···A, degrees
    sidechain: bool
    protein_index: int  # index in cx.pocket (-1: not a pocket atom)
    ligand_index: int  # index in cx.ligand
    h_coord: tuple[float, float, float]
    kind: ClassVar[str] = "hbond"


@dataclass(frozen=True)
class PlipHydrophobic(_ResidueFields):
    """A hydrophobic contact between two carbon atoms (PLIP: < 4.0 Å, reduced to one per patch)."""

    protein_atom: str
    ligand_atom: str
    distance: float
    protein_index: int
    ligand_index: int
    kind: ClassVar[str] = "hydrophobic"


@dataclass(frozen=True)
class PlipPiStacking(_ResidueFields):
    """Aromatic ring stacking: ``stacking`` is ``parallel`` or ``t-shaped``; distance between ring centroids."""

    protein_atoms: tuple[str, ...]
    ligand_atoms: tuple[str, ...]
    distance: float
    angle: float
    offset: float
    stacking: str
    kind: ClassVar[str] = "pi_stacking"


@dataclass(frozen=True)
class PlipPiCation(_ResidueFields):
    """A ring and a positive charge; ``charged`` says which side carries the charge."""

    protein_atoms: tuple[str, ...]
    ligand_atoms: tuple[str, ...]
    distance: float
    offset: float
    charged: str  # "protein" | "ligand"
    kind: ClassVar[str] = "pi_cation"


@dataclass(frozen=True)
class PlipSaltBridge(_ResidueFields):
    """Charged groups within 5.5 Å (centre to centre); ``positive`` says which side is positive."""

    protein_atoms: tuple[str, ...]
    ligand_atoms: tuple[str, ...]
    distance: float
    positive: str  # "protein" | "ligand"
    kind: ClassVar[str] = "salt_bridge"


@dataclass(frozen=True)
class PlipHalogenBond(_ResidueFields):
    """C–X···O halogen bond: the ligand halogen donates, a protein O/N/S accepts."""

    protein_atom: str
    ligand_atom: str
    distance: float
    donor_angle: float
    acceptor_angle: float
    protein_index: int
    ligand_index: int
    kind: ClassVar[str] = "halogen_bond"


@dataclass(frozen=True)
class PlipWaterBridge(_ResidueFields):
    """Protein and ligand linked through one water; ``donor`` is the side donating to the water."""

    protein_atom: str
    ligand_atom: str
    donor: str  # "protein" | "ligand"
    water_chain: str
    water_number: int
    distance_acceptor_water: float
    distance_donor_water: float
    donor_angle: float
    water_angle: float
    protein_index: int
    ligand_index: int
    kind: ClassVar[str] = "water_bridge"


@dataclass(frozen=True)
class PlipMetalComplex(_ResidueFields):
    """A metal ion coordinated by an atom (of the ligand, the protein or a water).

    The residue fields describe the coordinating atom's residue; ``location`` is PLIP's
    ``ligand``, ``protein.sidechain``, ``protein.mainchain`` or ``water``.
    """

    target_atom: str
    location: str
    metal: str  # element / residue name of the ion, e.g. ZN
    metal_chain: str
    metal_number: int
    distance: float
    geometry: str
    coordination: int
    rms: float
    kind: ClassVar[str] = "metal_complex"


@dataclass(frozen=True)
class PlipCandidates:
    """PLIP's H-bond candidates, for explaining disagreements (``plip_interactions(details=True)``).

    Atoms are ``("protein", pocket index)`` or ``("ligand", ligand index)``. ``donors``
    maps a donor atom to Open Babel's hydrogens on it; ``raw_hbonds`` are PLIP's geometric
    H-bonds before its salt-bridge and one-H-bond-per-donor refinement, as
    (donor side, pocket index, ligand index, D–H···A angle, D···A distance).
    """

    donors: dict[tuple[str, int], tuple[tuple[float, float, float], ...]]
    acceptors: frozenset[tuple[str, int]]
    raw_hbonds: tuple[tuple[str, int, int, float, float], ...]


@dataclass(frozen=True)
class PlipInteractions:
    """Everything PLIP reports for one ligand copy."""

    pdb_id: str
    ligand: ResidueKey
    sites: tuple[str, ...]  # PLIP's site ids (``HET:CHAIN:NUM``) holding the ligand
    hbonds: tuple[PlipHBond, ...]
    hydrophobic: tuple[PlipHydrophobic, ...]
    pi_stacking: tuple[PlipPiStacking, ...]
    pi_cation: tuple[PlipPiCation, ...]
    salt_bridges: tuple[PlipSaltBridge, ...]
    halogen_bonds: tuple[PlipHalogenBond, ...]
    water_bridges: tuple[PlipWaterBridge, ...]
    metal_complexes: tuple[PlipMetalComplex, ...]
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())
    candidates: PlipCandidates | None = field(default=None, compare=False)

    def all(self) -> tuple:
        """All interactions, grouped by type."""
        return (self.hbonds + self.hydrophobic + self.pi_stacking + self.pi_cation + self.salt_bridges
                + self.halogen_bonds + self.water_bridges + self.metal_complexes)

    def counts(self) -> dict[str, int]:
        """Number of interactions per type (``kind``)."""
        kinds = ["hbond", "hydrophobic", "pi_stacking", "pi_cation", "salt_bridge", "halogen_bond",
                 "water_bridge", "metal_complex"]
        out = dict.fromkeys(kinds, 0)
        for item in self.all():
            out[item.kind] += 1
        return out


# ----------------------------------------------------------------------------- PDB input


@lru_cache(maxsize=1)
def _amino_acid_names() -> frozenset[str]:
    return frozenset(info.amino_acid_names())


@dataclass(frozen=True)
class PlipInput:
    """The PDB text PLIP reads, with the atoms behind every serial number (serial = row + 1)."""

    pdb_text: str
    atoms: struc.AtomArray
    ligand_rows: np.ndarray
    pocket_index: np.ndarray  # per row: index in cx.pocket or -1
    ligand_index: np.ndarray  # per row: index in cx.ligand or -1
    notes: tuple[str, ...]


def _atom_key(arr: struc.AtomArray, i: int) -> tuple:
    return (str(arr.chain_id[i]), int(arr.res_id[i]), str(arr.ins_code[i]), str(arr.res_name[i]), str(arr.atom_name[i]))


def _pdb_name(name: str, element: str) -> str:
    """Atom name in columns 13–16: one-letter elements start in column 14 unless the name has 4 characters."""
    if len(name) < 4 and len(element.strip()) == 1:
        return f" {name:<3}"
    return f"{name:<4}"[:4]


def _formal_charge(value: int) -> str:
    return f"{abs(value)}{'+' if value > 0 else '-'}" if value else "  "


def _residue_starts(atoms: struc.AtomArray) -> np.ndarray:
    return struc.get_residue_starts(atoms, add_exclusive_stop=True)


def plip_input(cx: Complex) -> PlipInput:
    """The PDB text for PLIP: the entry's first model (or 25 Å around the ligand if it is too large).

    Raises PlipError when the ligand copy cannot be located or the model cannot be written
    as PDB (more than 62 chains near the ligand, residue numbers outside -999..9999).
    """
    notes: list[str] = []
    full = read_atoms(cx.source)
    keys = {_atom_key(full, i): i for i in range(full.array_length() - 1, -1, -1)}
    lig_rows = np.array([keys.get(_atom_key(cx.ligand, i), -1) for i in range(cx.ligand.array_length())])
    if (lig_rows < 0).any() and not (lig_rows < 0).all():
        raise PlipError(f"{cx.pdb_id}: only part of ligand {cx.ligand_code} is found in {Path(cx.source).name}")
    if (lig_rows < 0).all():
        # The ligand does not come from the entry (ligand file): append it as a hetero group.
        lig = cx.ligand.copy()
        lig.hetero[:] = True
        # An entry group on top of the new ligand (e.g. the crystal pose of a redocked ligand) would clash.
        d2 = ((full.coord[:, None, :] - lig.coord[None]) ** 2).sum(-1).min(1)
        res_pos = struc.get_residue_positions(full, np.arange(full.array_length()))
        clash = np.isin(res_pos, np.unique(res_pos[d2 < 0.5 ** 2])) & full.hetero
        if clash.any():
            full = full[~clash]
            notes.append("entry hetero groups overlapping the ligand removed")
        full = full + lig
        lig_rows = np.arange(full.array_length() - lig.array_length(), full.array_length())
        notes.append("ligand appended to the entry's atoms")
    if full.array_length() > MAX_PDB_ATOMS:
        full, lig_rows = _region(full, lig_rows, REGION_CUTOFF)
        notes.append(f"model too large for PDB format: whole residues within {REGION_CUTOFF:g} Å of the ligand")
    chains = list(dict.fromkeys(str(c) for c in full.chain_id))
    if any(len(c) != 1 for c in chains):
        if len(chains) > len(_CHAIN_LETTERS):
            full, lig_rows = _region(full, lig_rows, REGION_CUTOFF)
            chains = list(dict.fromkeys(str(c) for c in full.chain_id))
            if len(chains) > len(_CHAIN_LETTERS):
                raise PlipError(f"{cx.pdb_id}: {len(chains)} chains near the ligand cannot be written as PDB for PLIP")
    if full.res_id.max() > 9999 or full.res_id.min() < -999:
        raise PlipError(f"{cx.pdb_id}: residue numbers outside -999..9999 cannot be written as PDB for PLIP")
    text = _pdb_text(full, chains)
    pkeys = {_atom_key(cx.pocket, i): i for i in range(cx.pocket.array_length())}
    lkeys = {_atom_key(cx.ligand, i): i for i in range(cx.ligand.array_length())}
    pocket_index = np.full(full.array_length(), -1)
    ligand_index = np.full(full.array_length(), -1)
    for row in range(full.array_length()):
        k = _atom_key(full, row)
        pocket_index[row] = pkeys.get(k, -1)
    for li, row in enumerate(lig_rows):
        ligand_index[row] = li
    return PlipInput(text, full, np.asarray(lig_rows), pocket_index, ligand_index, tuple(notes))


def _region(full: struc.AtomArray, lig_rows: np.ndarray, cutoff: float) -> tuple[struc.AtomArray, np.ndarray]:
    """Whole residues with any atom within ``cutoff`` of the ligand; ligand rows re-indexed."""
    lig = full.coord[lig_rows]
    starts = _residue_starts(full)
    keep = np.zeros(full.array_length(), bool)
    for a, b in zip(starts[:-1], starts[1:]):
        d2 = ((full.coord[a:b, None, :] - lig[None]) ** 2).sum(-1).min()
        if d2 <= cutoff * cutoff:
            keep[a:b] = True
    keep[lig_rows] = True
    new_index = np.cumsum(keep) - 1
    return full[keep], new_index[lig_rows]


def _pdb_text(atoms: struc.AtomArray, chains: list[str]) -> str:
    """PDB records PLIP reads: MODRES, ATOM/HETATM, LINK (inter-residue bonds with a hetero group), CONECT."""
    single = all(len(c) == 1 for c in chains)
    chain_map = {c: (c if single else _CHAIN_LETTERS[k]) for k, c in enumerate(chains)}
    names = set(str(n) for n in atoms.res_name)
    alias: dict[str, str] = {}
    for n in sorted(names):
        if len(n) > 3:  # newer 5-character CCD codes: a 3-character alias that is not used elsewhere
            k = 0
            while f"Z{k:02d}" in names or f"Z{k:02d}" in alias.values():
                k += 1
            alias[n] = f"Z{k:02d}"
    n = atoms.array_length()
    chain = [chain_map[str(c)] for c in atoms.chain_id]
    resn = [alias.get(str(r), str(r)) for r in atoms.res_name]
    elem = [str(e).upper().strip() for e in atoms.element]
    charge = atoms.charge if "charge" in atoms.get_annotation_categories() else np.zeros(n, int)
    hetero = atoms.hetero
    res_pos = struc.get_residue_positions(atoms, np.arange(n))
    water = np.isin(atoms.res_name, list(_WATER))

    def res_field(i: int) -> str:
        return f"{resn[i]:>3} {chain[i]}{int(atoms.res_id[i]):>4}{str(atoms.ins_code[i])[:1] or ' ':1}"

    lines: list[str] = []
    bonds = atoms.bonds.as_array()[:, :2] if atoms.bonds is not None else np.zeros((0, 2), int)
    inter = bonds[res_pos[bonds[:, 0]] != res_pos[bonds[:, 1]]] if len(bonds) else bonds
    # MODRES: amino-acid hetero groups bonded into the polymer (so PLIP does not take them for ligands).
    amino = _amino_acid_names()
    modres_done = set()
    for a, b in inter:
        for x, y in ((a, b), (b, a)):
            if hetero[x] and not hetero[y] and str(atoms.res_name[x]) in amino and res_pos[x] not in modres_done:
                modres_done.add(res_pos[x])
                lines.append(f"MODRES XXXX {res_field(x)}  UNK  MODIFIED RESIDUE")
    for i in range(n):
        rec = "HETATM" if hetero[i] else "ATOM  "
        x, y, z = (float(v) for v in atoms.coord[i])
        lines.append(f"{rec}{i + 1:>5} {_pdb_name(str(atoms.atom_name[i]), elem[i])} {res_field(i)}   "
                     f"{x:8.3f}{y:8.3f}{z:8.3f}{1.0:6.2f}{0.0:6.2f}          {elem[i]:>2}{_formal_charge(int(charge[i]))}")
    for a, b in inter:
        if not (hetero[a] or hetero[b]):
            continue
        d = float(np.linalg.norm(atoms.coord[a] - atoms.coord[b]))
        lines.append(f"LINK        {_pdb_name(str(atoms.atom_name[a]), elem[a])} {res_field(a)}               "
                     f"{_pdb_name(str(atoms.atom_name[b]), elem[b])} {res_field(b)}  1555   1555 {d:5.2f}")
    partners: dict[int, list[int]] = {}
    for a, b in bonds:
        if (hetero[a] and not water[a]) or (hetero[b] and not water[b]):
            partners.setdefault(int(a), []).append(int(b))
            partners.setdefault(int(b), []).append(int(a))
    for a in sorted(partners):
        if not (hetero[a] and not water[a]):
            continue
        ps = sorted(set(partners[a]))
        for k in range(0, len(ps), 4):
            lines.append("CONECT" + f"{a + 1:>5}" + "".join(f"{p + 1:>5}" for p in ps[k:k + 4]))
    lines.append("END")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- worker


class PlipWorker:
    """One PLIP worker process serving many complexes; use as a context manager or call close().

    The process is a plain ``python -I plip_worker.py`` (no ``misi_agent`` import there),
    started on the first request and restarted after a crash or a timeout.
    """

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, hash_seed: int = 0):
        self.timeout = float(timeout)
        self.hash_seed = int(hash_seed)  # PYTHONHASHSEED of the worker: fixed, so set orders repeat
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue | None = None
        self._log = None
        self._next_id = 0

    def __enter__(self) -> "PlipWorker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def _start(self) -> None:
        self._log = tempfile.TemporaryFile(mode="w+b")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONHASHSEED"] = str(self.hash_seed)
        self._proc = subprocess.Popen([sys.executable, "-I", "-u", str(_WORKER_SCRIPT)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._log, env=env, text=True, bufsize=1)
        self._lines = queue.Queue()
        proc, lines = self._proc, self._lines

        def pump() -> None:
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        ready = self._read(STARTUP_TIMEOUT, "starting")
        if not ready.get("ready"):
            self._kill()
            raise PlipError("PLIP worker did not start")

    def _log_tail(self) -> str:
        if self._log is None:
            return ""
        try:
            self._log.seek(0)
            text = self._log.read().decode("utf-8", "replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return text[-1].strip() if text else ""

    def _read(self, timeout: float, what: str) -> dict:
        assert self._lines is not None
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self._kill()
            raise PlipError(f"PLIP timed out after {timeout:g} s {what}") from None
        if line is None:
            tail = self._log_tail()
            self._kill()
            raise PlipError(f"PLIP worker died {what}" + (f": {tail}" if tail else ""))
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            self._kill()
            raise PlipError(f"PLIP worker answered garbage {what}") from None

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
        self._proc = None
        self._lines = None

    def close(self) -> None:
        """Stop the worker (closing stdin lets it exit on its own)."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        if self._log is not None:
            self._log.close()
            self._log = None

    def request(self, pdb_text: str, ligand_serials: list[int], name: str = "", details: bool = False) -> dict:
        """Send one PDB text; returns the worker's answer (``sites``, ``seconds``) or raises PlipError."""
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._proc is not None and self._proc.stdin is not None
        self._next_id += 1
        req = {"id": self._next_id, "pdb": pdb_text, "ligand_serials": [int(s) for s in ligand_serials], "name": name,
               "details": bool(details)}
        try:
            self._proc.stdin.write(json.dumps(req) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            tail = self._log_tail()
            self._kill()
            raise PlipError(f"PLIP worker died before {name}" + (f": {tail}" if tail else "")) from None
        answer = self._read(self.timeout, f"on {name}" if name else "")
        if answer.get("id") != self._next_id:
            self._kill()
            raise PlipError(f"PLIP worker answered out of order on {name}")
        if not answer.get("ok"):
            raise PlipError(f"PLIP failed on {name}: {answer.get('error', 'unknown error')}")
        return answer


_DEFAULT_WORKER: PlipWorker | None = None


def default_worker() -> PlipWorker:
    """A process-wide worker, started lazily and stopped at exit."""
    global _DEFAULT_WORKER
    if _DEFAULT_WORKER is None:
        _DEFAULT_WORKER = PlipWorker()
        atexit.register(_DEFAULT_WORKER.close)
    return _DEFAULT_WORKER


# ----------------------------------------------------------------------------- mapping back


class _Mapper:
    """PDB serial numbers -> atoms of the written model, with coordinate checks."""

    def __init__(self, inp: PlipInput, pdb_id: str):
        self.inp = inp
        self.pdb_id = pdb_id
        self.lig = set(int(r) + 1 for r in inp.ligand_rows)

    def row(self, serial: int, xyz: list[float] | None = None) -> int:
        row = int(serial) - 1
        if not 0 <= row < self.inp.atoms.array_length():
            raise PlipError(f"{self.pdb_id}: PLIP reported atom serial {serial} outside the input")
        if xyz is not None and np.linalg.norm(self.inp.atoms.coord[row] - np.asarray(xyz)) > 0.01:
            raise PlipError(f"{self.pdb_id}: PLIP atom {serial} does not match the input coordinates")
        return row

    def is_ligand(self, serial: int) -> bool:
        return int(serial) in self.lig

    def name(self, serial: int) -> str:
        return str(self.inp.atoms.atom_name[self.row(serial)])

    def residue(self, serial: int) -> tuple[str, int, str, str]:
        a, r = self.inp.atoms, self.row(serial)
        return str(a.res_name[r]), int(a.res_id[r]), str(a.ins_code[r]), str(a.chain_id[r])

    def pocket_index(self, serial: int) -> int:
        return int(self.inp.pocket_index[self.row(serial)])

    def ligand_index(self, serial: int) -> int:
        return int(self.inp.ligand_index[self.row(serial)])


def _side(flag: bool) -> str:
    return "protein" if flag else "ligand"


def _convert(site: dict, m: _Mapper) -> dict[str, list]:
    out: dict[str, list] = {k: [] for k in ("hbonds", "hydrophobic", "pi_stacking", "pi_cation", "salt_bridges",
                                            "halogen_bonds", "water_bridges", "metal_complexes")}
    for hb in site["hbonds"]:
        d = m.row(hb["donor"], hb["donor_xyz"]) + 1
        a = m.row(hb["acceptor"], hb["acceptor_xyz"]) + 1
        prot, lig = (d, a) if hb["protisdon"] else (a, d)
        if not m.is_ligand(lig):
            continue
        out["hbonds"].append(PlipHBond(*m.residue(prot), protein_atom=m.name(prot), ligand_atom=m.name(lig),
                                       donor=_side(hb["protisdon"]), donor_atom=m.name(d), acceptor_atom=m.name(a),
                                       distance=round(hb["distance_ad"], 3), h_distance=round(hb["distance_ah"], 3),
                                       angle=round(hb["angle"], 2), sidechain=hb["sidechain"],
                                       protein_index=m.pocket_index(prot), ligand_index=m.ligand_index(lig),
                                       h_coord=tuple(round(v, 3) for v in hb["h_xyz"])))
    for h in site["hydrophobic"]:
        if not m.is_ligand(h["ligand"]):
            continue
        out["hydrophobic"].append(PlipHydrophobic(*m.residue(h["protein"]), protein_atom=m.name(h["protein"]),
                                                  ligand_atom=m.name(h["ligand"]), distance=round(h["distance"], 3),
                                                  protein_index=m.pocket_index(h["protein"]),
                                                  ligand_index=m.ligand_index(h["ligand"])))
    for p in site["pistacking"]:
        if not any(m.is_ligand(s) for s in p["ligand"]):
            continue
        out["pi_stacking"].append(PlipPiStacking(*m.residue(p["protein"][0]),
                                                 protein_atoms=tuple(m.name(s) for s in p["protein"]),
                                                 ligand_atoms=tuple(m.name(s) for s in p["ligand"]),
                                                 distance=round(p["distance"], 3), angle=round(p["angle"], 2),
                                                 offset=round(p["offset"], 3),
                                                 stacking="parallel" if p["type"] == "P" else "t-shaped"))
    for p in site["pication"]:
        if not any(m.is_ligand(s) for s in p["ligand"]):
            continue
        out["pi_cation"].append(PlipPiCation(*m.residue(p["protein"][0]),
                                             protein_atoms=tuple(m.name(s) for s in p["protein"]),
                                             ligand_atoms=tuple(m.name(s) for s in p["ligand"]),
                                             distance=round(p["distance"], 3), offset=round(p["offset"], 3),
                                             charged=_side(p["protcharged"])))
    for s in site["saltbridges"]:
        if not any(m.is_ligand(x) for x in s["ligand"]):
            continue
        out["salt_bridges"].append(PlipSaltBridge(*m.residue(s["protein"][0]),
                                                  protein_atoms=tuple(m.name(x) for x in s["protein"]),
                                                  ligand_atoms=tuple(m.name(x) for x in s["ligand"]),
                                                  distance=round(s["distance"], 3), positive=_side(s["protispos"])))
    for h in site["halogen"]:
        if not m.is_ligand(h["donor"]):
            continue
        out["halogen_bonds"].append(PlipHalogenBond(*m.residue(h["acceptor"]), protein_atom=m.name(h["acceptor"]),
                                                    ligand_atom=m.name(h["donor"]), distance=round(h["distance"], 3),
                                                    donor_angle=round(h["don_angle"], 2),
                                                    acceptor_angle=round(h["acc_angle"], 2),
                                                    protein_index=m.pocket_index(h["acceptor"]),
                                                    ligand_index=m.ligand_index(h["donor"])))
    for w in site["water_bridges"]:
        prot, lig = (w["donor"], w["acceptor"]) if w["protisdon"] else (w["acceptor"], w["donor"])
        if not m.is_ligand(lig):
            continue
        wres = m.residue(w["water"])
        out["water_bridges"].append(PlipWaterBridge(*m.residue(prot), protein_atom=m.name(prot), ligand_atom=m.name(lig),
                                                    donor=_side(w["protisdon"]), water_chain=wres[3],
                                                    water_number=wres[1],
                                                    distance_acceptor_water=round(w["distance_aw"], 3),
                                                    distance_donor_water=round(w["distance_dw"], 3),
                                                    donor_angle=round(w["d_angle"], 2), water_angle=round(w["w_angle"], 2),
                                                    protein_index=m.pocket_index(prot), ligand_index=m.ligand_index(lig)))
    # Metal complexes: PLIP reports them for metals that are part of the ligand (linked to it
    # by LINK records, hence a composite) and lists every coordinating atom of such a metal.
    for c in site["metal"]:
        mres = m.residue(c["metal"])
        out["metal_complexes"].append(PlipMetalComplex(*m.residue(c["target"]), target_atom=m.name(c["target"]),
                                                       location=c["location"], metal=mres[0], metal_chain=mres[3],
                                                       metal_number=mres[1], distance=round(c["distance"], 3),
                                                       geometry=c["geometry"], coordination=c["coordination"],
                                                       rms=round(c["rms"], 3)))
    return out


def _atom_ref(m: _Mapper, serial: int) -> tuple[str, int]:
    return ("ligand", m.ligand_index(serial)) if m.is_ligand(serial) else ("protein", m.pocket_index(serial))


def _candidates(sites: list[dict], m: _Mapper) -> PlipCandidates:
    donors: dict[tuple[str, int], tuple] = {}
    acceptors: set[tuple[str, int]] = set()
    raw = []
    for site in sites:
        c = site["candidates"]
        for key in ("ligand_donors", "protein_donors"):
            for serial, hs in c[key]:
                donors[_atom_ref(m, serial)] = tuple(tuple(round(v, 3) for v in h) for h in hs)
        for key in ("ligand_acceptors", "protein_acceptors"):
            acceptors.update(_atom_ref(m, s) for s in c[key])
        for d, a, protisdon, ang, dist in c["all_hbonds"]:
            prot, lig = (d, a) if protisdon else (a, d)
            if m.is_ligand(lig):
                raw.append((_side(protisdon), m.pocket_index(prot), m.ligand_index(lig), round(ang, 2), round(dist, 3)))
    return PlipCandidates(donors=donors, acceptors=frozenset(acceptors), raw_hbonds=tuple(sorted(raw)))


def _sort_key(item) -> tuple:
    return (item.chain, item.residue_number, item.insertion_code, getattr(item, "protein_atom", ""),
            getattr(item, "ligand_atom", ""), str(getattr(item, "protein_atoms", "")), str(getattr(item, "ligand_atoms", "")),
            getattr(item, "target_atom", ""))


def plip_interactions(cx: Complex, worker: PlipWorker | None = None, timeout: float | None = None,
                      details: bool = False) -> PlipInteractions:
    """Run PLIP on the complex's entry and return the interactions of its ligand copy.

    ``worker`` reuses a running PLIP process (e.g. over a whole data set); by default a
    process-wide worker is used. Raises PlipError (a MisiError) when PLIP fails, times out,
    or does not recognise the ligand. ``details`` adds PLIP's H-bond candidates
    (:class:`PlipCandidates`).
    """
    inp = plip_input(cx)
    w = worker or default_worker()
    if timeout is not None:
        w.timeout = float(timeout)
    answer = w.request(inp.pdb_text, [int(r) + 1 for r in inp.ligand_rows], name=f"{cx.pdb_id} {cx.ligand_code}",
                       details=details)
    sites = answer["sites"]
    if not sites:
        raise PlipError(f"{cx.pdb_id}: PLIP does not treat {cx.ligand_code} {cx.ligand_key.chain}"
                        f"{cx.ligand_key.number} as a ligand")
    mapper = _Mapper(inp, cx.pdb_id)
    merged: dict[str, list] = {}
    for site in sites:
        for k, v in _convert(site, mapper).items():
            merged.setdefault(k, []).extend(v)
    notes = list(inp.notes)
    for site in sites:
        if len(site["members"]) > 1:
            notes.append(f"PLIP composite ligand {'-'.join(m[0] for m in site['members'])} ({site['site']})")
    return PlipInteractions(pdb_id=cx.pdb_id, ligand=cx.ligand_key, sites=tuple(s["site"] for s in sites),
                            **{k: tuple(sorted(set(v), key=_sort_key)) for k, v in merged.items()},
                            seconds=float(answer.get("seconds", 0.0)), notes=tuple(notes),
                            candidates=_candidates(sites, mapper) if details else None)
