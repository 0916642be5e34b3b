"""A small hand-built gold question set for the scorer tests (not the generator's output).

Commands and letters are written by hand; the H-bond answers and the interaction-location
options come from real committed structures: pocket N/O atoms within 3.4 Å of a ligand N/O
atom stand in for the H-bond truth (the scorer only needs realistic names: primes, several
chains, a four-letter chain id), and the T8 answer is the whole-Å shift that brings the
bond's midpoint onto the line of sight in the real front view.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

import misi_agent
from misi_agent.bench import tasks as T
from misi_agent.bench.answers import BondItem, format_pocket_answer, format_residue_answer
from misi_agent.bench.prompts import build_prompt
from misi_agent.bench.question import Question
from misi_agent.scene import scene_from_complex
from misi_agent.structure import load_complex

FIXTURES = Path(misi_agent.__file__).parent / "data" / "structures"


@lru_cache(maxsize=None)
def complex_(pdb: str):
    ext = ".pdb.gz" if (FIXTURES / f"{pdb}.pdb.gz").exists() else ".cif.gz"
    return load_complex(FIXTURES / f"{pdb}{ext}")


def polar_contacts(pdb: str, cutoff: float = 3.4) -> list[tuple[BondItem, int, int]]:
    """(bond, pocket atom index, ligand atom index) for pocket-ligand N/O pairs within ``cutoff``, in file order."""
    cx = complex_(pdb)
    P, L = cx.pocket, cx.ligand
    pm = np.flatnonzero(np.isin(P.element, ["N", "O"]))
    lm = np.flatnonzero(np.isin(L.element, ["N", "O"]))
    d = np.linalg.norm(P.coord[pm][:, None] - L.coord[lm][None], axis=2)
    out = []
    for i, j in zip(*np.nonzero(d < cutoff)):
        a, b = pm[i], lm[j]
        num = f"{P.res_id[a]}{P.ins_code[a]}"
        out.append((BondItem(str(P.res_name[a]), str(P.atom_name[a]), str(L.atom_name[b]), num, str(P.chain_id[a])),
                    int(a), int(b)))
    return out


def _q(qid: str, task: str, answer: str, **prompt) -> Question:
    n = T.TASKS[task].n_images
    options = prompt.get("options")
    return Question(qid, task, build_prompt(task, **prompt), [f"img/{qid}_{k:02d}.png" for k in range(1, n + 1)],
                    answer, options, {"pdb_id": prompt["pdb_id"].lower(), "split": "test", "params": {}, "renderer": "raster"})


def _residue_bonds(pdb: str) -> dict[tuple[str, str, str], list[BondItem]]:
    by_res: dict[tuple[str, str, str], list[BondItem]] = {}
    for b, _, _ in polar_contacts(pdb):
        by_res.setdefault((b.chain, b.residue_number, b.residue_name), []).append(b)
    return by_res


def _interaction_location(pdb: str, letter: str) -> tuple[BondItem, list[str], str]:
    """The first contact's bond, four options with the true shift at ``letter``, and ``letter``."""
    bond, a, b = polar_contacts(pdb)[0]
    cx = complex_(pdb)
    sc = scene_from_complex(cx, "front")
    n_p = cx.pocket.array_length()
    mid = (sc.coords[a] + sc.coords[n_p + b]) / 2.0
    dx, dy = int(round(-mid[0])), int(round(-mid[1]))
    truth = f"move x {dx}, move y {dy}"
    decoys = [f"move x {-dx}, move y {dy}", f"move x {dx}, move y {-dy}", f"move x {dx + 3}, move y {dy - 2}"]
    if dx == 0:
        decoys[0] = f"move x {dx + 4}, move y {dy}"
    if dy == 0:
        decoys[1] = f"move x {dx}, move y {dy - 4}"
    k = T.CHOICE_LETTERS.index(letter)
    options = decoys[:k] + [truth] + decoys[k:]
    return bond, options, letter


@lru_cache(maxsize=None)
def gold_questions() -> tuple[Question, ...]:
    """Two or three items per column (23 in all), every task and both T4 columns present."""
    qs: list[Question] = []
    common = {"pdb_id": "6YQW"}
    qs += [_q("translation-1", T.TRANSLATION, "move x 3", **common), _q("translation-2", T.TRANSLATION, "move y -2", **common)]
    qs += [_q("rotation-1", T.ROTATION, "roll x 45", **common), _q("rotation-2", T.ROTATION, "roll y -15", **common),
           _q("rotation-3", T.ROTATION, "roll z 90", **common)]
    qs += [_q("zooming-1", T.ZOOMING, "move z 50", **common), _q("zooming-2", T.ZOOMING, "move z 43", **common)]
    # T4 positives with 1, 2 and 3 true bonds; negatives from residues without contacts.
    by_res = _residue_bonds("7rh3")
    picks = {}
    for key, bonds in by_res.items():
        picks.setdefault(min(len(bonds), 3), (key, bonds[:3]))
    for n in (1, 2, 3):
        (chain, num, name), bonds = picks[n]
        qs.append(_q(f"residue_ligand_interaction-pos{n}", T.RESIDUE_LIGAND, format_residue_answer(bonds),
                     pdb_id="7RH3", residue_name=name, residue_number=num, chain=chain))
    assert not polar_contacts("7loe"), "7loe was picked because no pocket N/O is near a ligand N/O"
    for k, r in enumerate(complex_("7loe").residues()[:2], start=1):
        qs.append(_q(f"residue_ligand_interaction-neg{k}", T.RESIDUE_LIGAND, "No", pdb_id="7LOE",
                     residue_name=r.name, residue_number=f"{r.number}{r.ins_code}", chain=r.chain))
    qs += [_q("translation_rotation-1", T.TRANSLATION_ROTATION, "C", target_pdb_id="7F5D", **common),
           _q("translation_rotation-2", T.TRANSLATION_ROTATION, "A", target_pdb_id="7USH", **common)]
    qs += [_q("rotation_rotation-1", T.ROTATION_ROTATION, "B", **common), _q("rotation_rotation-2", T.ROTATION_ROTATION, "D", **common)]
    qs += [_q("docking-1", T.DOCKING, "roll x 75, move x -14", **common),
           _q("docking-2", T.DOCKING, "roll z -30, move x 12", **common)]
    for pdb, lig, letter in (("1hpx", "KNI", "C"), ("7oeo", "V9Z", "A")):
        bond, options, letter = _interaction_location(pdb, letter)
        qs.append(_q(f"interaction_location-{pdb}", T.INTERACTION_LOCATION, letter, pdb_id=pdb.upper(),
                     chain=bond.chain, residue_name=bond.residue_name, residue_number=bond.residue_number,
                     residue_atom=bond.residue_atom, ligand_atom=bond.ligand_atom, options=options))
    for pdb, lig in (("1aku", "FMN"), ("1hpx", "KNI"), ("7oeo", "V9Z")):
        bonds = list(dict.fromkeys(b for b, _, _ in polar_contacts(pdb)))
        qs.append(_q(f"pocket_ligand_interaction-{pdb}", T.POCKET_LIGAND, format_pocket_answer(bonds), pdb_id=pdb.upper()))
    return tuple(qs)
