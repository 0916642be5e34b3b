"""What the tools of one question may use: its images, the structure store and the grounding.

Grounding says where 3D knowledge comes from:

* ``structure``: the entry named by the question's PDB ID, read from the structure store;
* ``images``: the pictures only: the geometric tools answer from a 3D reconstruction of the
  question's own views (:mod:`misi_agent.tools.reconstruction`); tools that have no
  image-only method fail with a clear error;
* ``auto``: the structure when the store has it, else the pictures.

:meth:`AgentContext.image_grounded` says which applies to an entry, and
:attr:`AgentContext.groundings_used` records, per PDB ID, what the tools actually used (the
agent loop copies it into the trace).

Choosing the ligand. An entry may hold several ligands (or copies of one); the benchmark
shows one. The agent must find the one in the pictures using only what a test taker has,
so :func:`choose_ligand` ranks the entry's organic candidates by what the question states:
the ligand code named in the text, ligand atom names named in the text (all present), the
residue named in the text (inside the candidate's 10 Å pocket), then
size (largest first, file order on ties, as :func:`misi_agent.structure.select_ligand`).
A manifest's ligand code is never used. Choosing from the pictures themselves (atom labels,
counts) is for the perception tools.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from misi_agent.agent.details import ResidueRef
from misi_agent.agent.registry import ToolError
from misi_agent.agent.store import StoredStructure, StructureStore, UnknownStructureError
from misi_agent.structure import POCKET_CUTOFF, Complex, ResidueKey, ligand_candidates, load_complex, read_atoms

GROUNDINGS = ("structure", "images", "auto")


@dataclass(frozen=True)
class LigandCandidate:
    """One organic non-polymer group of an entry."""

    key: ResidueKey
    n_atoms: int
    atom_names: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"code": self.key.name, "chain": self.key.chain, "number": self.key.number,
                "ins_code": self.key.ins_code, "n_atoms": self.n_atoms}


@dataclass(frozen=True)
class LigandChoice:
    """The chosen candidate, why, and the others."""

    chosen: LigandCandidate
    reason: str
    candidates: tuple[LigandCandidate, ...]
    tied: tuple[LigandCandidate, ...] = ()  # candidates the question's text could not tell apart

    def to_dict(self) -> dict:
        return {"ligand": self.chosen.to_dict(), "reason": self.reason,
                "candidates": [c.to_dict() for c in self.candidates]}


@lru_cache(maxsize=16)
def _atoms(path: str):
    return read_atoms(path)


@lru_cache(maxsize=32)
def _complex(path: str, key: ResidueKey, pdb_id: str) -> Complex:
    return load_complex(path, ligand_key=key, pdb_id=pdb_id)


def _residue_min_distance(atoms, idx: np.ndarray, residue: ResidueRef) -> float:
    mask = (atoms.chain_id == residue.chain) & (atoms.res_id == residue.number) & (atoms.ins_code == residue.ins_code) \
        & (atoms.res_name == residue.name) & ~atoms.hetero
    if not mask.any():
        return float("inf")
    d = np.linalg.norm(atoms.coord[mask][:, None, :] - atoms.coord[idx][None, :, :], axis=2)
    return float(d.min())


def choose_ligand(atoms, *, code: str | None = None, atom_names: Sequence[str] = (),
                  residue: ResidueRef | None = None, source: str = "") -> LigandChoice:
    """Rank the entry's ligand candidates by the question's statements (see the module doc)."""
    groups = ligand_candidates(atoms, include_additives=True)  # the pictures may show a listed additive
    if not groups:
        raise ToolError(f"{source}: no ligand found (no organic non-polymer group besides water, ions and additives)")
    cands = [LigandCandidate(k, len(i), tuple(str(n) for n in atoms.atom_name[i])) for k, i in groups]
    pool = list(range(len(cands)))
    reasons = []
    if code:
        hit = [j for j in pool if cands[j].key.name == code.upper()]
        if hit:
            pool, _ = hit, reasons.append(f"ligand code {code.upper()} named in the question")
    if atom_names:
        want = {a.upper() for a in atom_names}
        hit = [j for j in pool if want <= set(cands[j].atom_names)]
        if hit:
            pool, _ = hit, reasons.append(f"has the named atoms {', '.join(sorted(want))}")
    if residue is not None:  # pool stays in size order (ligand_candidates is largest first, file order on ties)
        near = [j for j in pool if _residue_min_distance(atoms, groups[j][1], residue) <= POCKET_CUTOFF]
        if near:
            pool = near
            reasons.append(f"{residue.label()} of chain {residue.chain} is in its pocket")
    j = pool[0]
    if len(pool) > 1 or not reasons:
        reasons.append("largest candidate" if len({c.key.name for c in cands}) > 1 or len(cands) > 1 else "only candidate")
    return LigandChoice(cands[j], "; ".join(reasons), tuple(cands), tuple(cands[k] for k in pool))


@dataclass
class AgentContext:
    """One question's tool context: its images (1-based), the store and the grounding mode."""

    images: Sequence[Path]
    store: StructureStore
    grounding: str = "structure"
    notes: list[str] = field(default_factory=list)
    groundings_used: dict[str, str] = field(default_factory=dict)  # PDB ID -> "structure" | "images"

    def __post_init__(self) -> None:
        if self.grounding not in GROUNDINGS:
            raise ToolError(f"unknown grounding {self.grounding!r} (expected {', '.join(GROUNDINGS)})")
        self.images = [Path(p) for p in self.images]

    def image(self, number: int) -> Path:
        """Image ``number`` (1-based, as the question counts them)."""
        if not 1 <= int(number) <= len(self.images):
            raise ToolError(f"image {number} does not exist (the question has images 1 to {len(self.images)})")
        return self.images[int(number) - 1]

    def image_grounded(self, pdb_id: str) -> bool:
        """True when tools must answer about ``pdb_id`` from the pictures: grounding ``images``, or
        ``auto`` and the store has no structure for it."""
        if self.grounding == "images":
            return True
        if self.grounding == "auto":
            try:
                self.store.find(pdb_id)
            except UnknownStructureError:
                return True
        return False

    def used(self, pdb_id: str, grounding: str) -> None:
        """Record that a tool answered about ``pdb_id`` with ``grounding`` (``structure`` or ``images``)."""
        self.groundings_used[str(pdb_id).upper()] = grounding

    def entry(self, pdb_id: str) -> StoredStructure:
        """The structure file of an entry, as the grounding allows."""
        if self.grounding == "images":
            raise ToolError("structure grounding is off (--grounding images): image-only grounding is not "
                            "available for this tool")
        try:
            found = self.store.find(pdb_id)
        except UnknownStructureError as exc:
            if self.grounding == "auto":
                raise ToolError(f"{exc}; image-only grounding (the --grounding auto fall-back) is not available "
                                "for this tool") \
                    from None
            raise ToolError(str(exc)) from None
        self.used(pdb_id, "structure")
        return found

    def ligand_choice(self, pdb_id: str, *, code: str | None = None, atom_names: Sequence[str] = (),
                      residue: ResidueRef | None = None, picture: int | None = 1,
                      shows: str = "complex") -> tuple[StoredStructure, LigandChoice]:
        """The entry and its ligand: by the question's text, then by the pictures.

        When the text leaves several candidates, each candidate's scene is drawn in the front
        view and compared with image ``picture`` (which ``shows`` the ``complex``, only the
        ``pocket``, or the named ``residue`` with the ligand); the best match wins.
        """
        entry = self.entry(pdb_id)
        atoms = _atoms(str(entry.path))
        choice = choose_ligand(atoms, code=code, atom_names=atom_names, residue=residue, source=str(entry.path))
        if len(choice.tied) > 1 and picture is not None and picture <= len(self.images):
            choice = self._choose_from_picture(entry, choice, residue, picture, shows)
        return entry, choice

    def _choose_from_picture(self, entry: StoredStructure, choice: LigandChoice, residue: ResidueRef | None,
                             picture: int, shows: str) -> LigandChoice:
        from misi_agent.camera import initial_view
        from misi_agent.scene import scene_from_complex
        from misi_agent.tools.ligand_identification import match_candidates

        scenes, kept = [], []
        for cand in choice.tied:
            try:
                cx = _complex(str(entry.path), cand.key, entry.pdb_id)
            except Exception:  # a candidate without a protein pocket cannot be the pictured one
                continue
            keys = cx.residues()
            if shows == "residue" and residue is not None:
                hit = [k for k in keys if (k.chain, k.number, k.ins_code, k.name)
                       == (residue.chain, residue.number, residue.ins_code, residue.name)]
                if not hit:
                    continue
                scene = scene_from_complex(cx, "front", residues=hit)
            else:
                scene = scene_from_complex(cx, "front")
                if shows == "pocket":  # the pocket alone, framed by itself
                    scene = scene.subset(~scene.is_ligand)
                    scene = scene.with_coords(initial_view(scene.coords, "front"))
            scenes.append(scene)
            kept.append(cand)
        if len(kept) < 2:
            return choice if not kept else LigandChoice(kept[0], choice.reason + "; the only candidate with a pocket",
                                                         choice.candidates, tuple(kept))
        match = match_candidates(self.image(picture), scenes)
        best = kept[match.best]
        reason = (f"{choice.reason.replace('; largest candidate', '')}; of {len(kept)} candidates, "
                  f"{best.key.name} {best.key.chain} {best.key.number} matches image {picture} best "
                  f"(silhouette correlation {match.scores[match.best]:.3f}, margin {match.margin:.3f})")
        return LigandChoice(best, reason, choice.candidates, tuple(kept))

    def complex(self, pdb_id: str, *, code: str | None = None, atom_names: Sequence[str] = (),
                residue: ResidueRef | None = None, picture: int | None = 1,
                shows: str = "complex") -> tuple[Complex, LigandChoice]:
        """The pocket + ligand complex the question shows, as far as the text and the pictures tell."""
        entry, choice = self.ligand_choice(pdb_id, code=code, atom_names=atom_names, residue=residue,
                                           picture=picture, shows=shows)
        return _complex(str(entry.path), choice.chosen.key, entry.pdb_id), choice
