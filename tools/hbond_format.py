"""MiSI-Bench answer strings for H-bond lists, and their parsers.

Two formats (protein atom first, then ligand atom, whichever side donates):

* residue–ligand (T4): ``ARG NH2, O1B; LYS NZ, O1A`` — residue name and atom only;
  the full T4 answer is ``No`` or ``Yes: <list>`` (:func:`format_residue_answer`);
* pocket–ligand (T9): ``ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A`` — residue name, number
  (with insertion code, ``45A``), residue atom, chain, ligand atom.

A pair found in both directions (each atom donor and acceptor) appears once. Items are
sorted (chain, number, insertion code, residue, protein atom, ligand atom), so the text is
deterministic. Parsers are tolerant of spacing, case and order and return sets of keys;
``parse_*(format_*(bonds)) == *_keys(bonds)``.
"""
from __future__ import annotations

import re
from typing import Iterable

from misi_agent.errors import MisiError

ResidueKey = tuple[str, str, str]                      # (residue, protein atom, ligand atom)
PocketKey = tuple[str, int, str, str, str, str]        # (residue, number, ins, protein atom, chain, ligand atom)


class AnswerFormatError(MisiError):
    """An H-bond answer string that does not follow the expected format (one line)."""


def _norm(token: str) -> str:
    return token.strip().upper()


def residue_keys(bonds: Iterable) -> set[ResidueKey]:
    """Direction-free residue–ligand keys of H-bonds (objects with residue_name, protein_atom, ligand_atom)."""
    return {(_norm(b.residue_name), _norm(b.protein_atom), _norm(b.ligand_atom)) for b in bonds}


def pocket_keys(bonds: Iterable) -> set[PocketKey]:
    """Direction-free pocket–ligand keys of H-bonds (residue, number, insertion, atom, chain, ligand atom)."""
    return {(_norm(b.residue_name), int(b.residue_number), _norm(b.insertion_code), _norm(b.protein_atom),
             _norm(b.chain), _norm(b.ligand_atom)) for b in bonds}


def _pocket_sort(k: PocketKey) -> tuple:
    res, num, ins, atom, chain, lig = k
    return (chain, num, ins, res, atom, lig)


def format_residue_ligand(bonds: Iterable) -> str:
    """``ARG NH2, O1B; LYS NZ, O1A`` (empty string for no bonds)."""
    keys = sorted(residue_keys(bonds))
    return "; ".join(f"{r} {a}, {l}" for r, a, l in keys)


def format_residue_answer(bonds: Iterable) -> str:
    """The full T4 answer: ``No`` or ``Yes: ARG NH2, O1B; ...``."""
    body = format_residue_ligand(bonds)
    return f"Yes: {body}" if body else "No"


def format_pocket_ligand(bonds: Iterable) -> str:
    """``ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A`` (empty string for no bonds)."""
    items = []
    for res, num, ins, atom, chain, lig in sorted(pocket_keys(bonds), key=_pocket_sort):
        protein = f"{res} {num}{ins} {atom}" + (f" {chain}" if chain else "")
        items.append(f"{protein}, {lig}")
    return "; ".join(items)


_PREFIX = re.compile(r"^\s*(yes|no)\b\s*[:.,]?\s*", re.IGNORECASE)
_NONE = {"", "NO", "NONE", "N/A", "-"}
_NUMBER = re.compile(r"^(-?\d+)([A-Za-z]?)$")


def _items(text: str) -> list[str]:
    text = text.strip().strip(".")
    return [t for t in (s.strip() for s in re.split(r"[;\n]+", text)) if t]


def _split_item(item: str) -> tuple[list[str], str] | None:
    if "," not in item:
        return None
    left, _, right = item.rpartition(",")
    protein = left.replace(",", " ").split()
    ligand = right.split()
    if len(ligand) != 1 or not protein:
        return None
    return protein, ligand[0]


def parse_residue_ligand(text: str, strict: bool = True) -> set[ResidueKey]:
    """Parse ``[Yes:] ARG NH2, O1B; LYS NZ, O1A`` (or ``No``) into (residue, atom, ligand atom) keys.

    With ``strict=False`` malformed items are skipped instead of raising.
    """
    m = _PREFIX.match(text)
    if m and m.group(1).lower() == "no" and not text[m.end():].strip():
        return set()
    body = text[m.end():] if m else text
    if _norm(body) in _NONE:
        return set()
    out: set[ResidueKey] = set()
    for item in _items(body):
        parts = _split_item(item)
        if parts is None or len(parts[0]) != 2:
            if strict:
                raise AnswerFormatError(f"cannot read H-bond '{item}' (expected 'RES ATOM, LIGATOM')")
            continue
        (res, atom), lig = parts
        out.add((_norm(res), _norm(atom), _norm(lig)))
    return out


def parse_pocket_ligand(text: str, strict: bool = True) -> set[PocketKey]:
    """Parse ``ARG 45 NH2 A, O1B; LYS 47A NZ A, O1A`` into (residue, number, insertion, atom, chain, ligand atom).

    The chain may be omitted (blank chain ID). With ``strict=False`` malformed items are
    skipped instead of raising.
    """
    m = _PREFIX.match(text)
    body = text[m.end():] if m else text
    if _norm(body) in _NONE:
        return set()
    out: set[PocketKey] = set()
    for item in _items(body):
        parts = _split_item(item)
        key = None
        if parts is not None and len(parts[0]) in (3, 4):
            protein, lig = parts
            num = _NUMBER.match(protein[1])
            if num:
                chain = protein[3] if len(protein) == 4 else ""
                key = (_norm(protein[0]), int(num.group(1)), _norm(num.group(2)), _norm(protein[2]),
                       _norm(chain), _norm(lig))
        if key is None:
            if strict:
                raise AnswerFormatError(f"cannot read H-bond '{item}' (expected 'RES NUM ATOM CHAIN, LIGATOM')")
            continue
        out.add(key)
    return out
