"""What a question's text says: PDB ID, ligand, named residue, named bond, options.

The agent reads only what a test taker reads. The prompts of
:mod:`misi_agent.bench.prompts` state the item's PDB ID and ligand code ("binding pocket of
PDB entry 6YQW ... ligand 82I"), the residue of a residue–ligand question ("ARG 45 of chain
A"), the bond of an interaction-location question ("chain A, LYS 47 NZ forms a hydrogen
bond with the ligand atom O1A") and its options ("A. move x 3, move y -2"). These
functions pull them out of the text with patterns that also accept close variants
("PDB ID 6yqw", "residue ARG45 (chain A)"), so questions written elsewhere can be read.
Nothing here looks at a question's ``answer`` or ``meta``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from misi_agent.errors import MisiError

_PDB = re.compile(r"\bPDB(?:\s+(?:entry|entries|ID|code|structure))?\s*[:#]?\s*([0-9][A-Za-z0-9]{3})\b", re.IGNORECASE)
_LIGAND = re.compile(r"\bligand\s+(?:code\s+)?([A-Z0-9]{1,5})\b(?![a-z])")
_T4_RESIDUE = re.compile(
    r"\b([A-Z]{3})\s?(-?\d+[A-Z]?)\s*(?:,\s*|\()?\s*of\s+chain\s+([A-Za-z0-9]{1,4})\b"
    r"|\bchain\s+([A-Za-z0-9]{1,4})\s*,?\s+([A-Z]{3})\s?(-?\d+[A-Z]?)\b")
_T8_BOND = re.compile(
    r"\bchain\s+([A-Za-z0-9]{1,4})\s*,\s*([A-Z]{3})\s?(-?\d+[A-Z]?)\s+([A-Z0-9'\"*]{1,4})(?![A-Za-z0-9'\"*])"
    r".{0,80}?\bligand\s+atom\s+([A-Z0-9'\"*]{1,5})(?![A-Za-z0-9'\"*])", re.DOTALL)  # names may end in a prime
_OPTION = re.compile(r"^\s*\(?([A-D])[.):]\s+(.+?)\s*$", re.MULTILINE)
_ATOM_NAME = re.compile(r"\bligand\s+atoms?\s+([A-Z0-9'\"*]{1,5}(?:\s*(?:,|and)\s*[A-Z0-9'\"*]{1,5})*)")
_NOT_LIGAND_CODES = {"A", "I", "THE", "ATOM", "ATOMS", "AND", "IS", "IN"}


class DetailsError(MisiError):
    """A question whose text lacks what its task needs (one-line message)."""


@dataclass(frozen=True)
class ResidueRef:
    """A residue named in a question: name, number (with insertion code) and chain."""

    name: str
    number: int
    ins_code: str
    chain: str

    def label(self) -> str:
        return f"{self.name} {self.number}{self.ins_code}"

    def to_dict(self) -> dict:
        return {"name": self.name, "number": self.number, "ins_code": self.ins_code, "chain": self.chain}


@dataclass(frozen=True)
class BondRef:
    """An H-bond named in a question: the residue, its atom and the ligand atom."""

    residue: ResidueRef
    residue_atom: str
    ligand_atom: str


@dataclass(frozen=True)
class QuestionDetails:
    """Everything the text states; ``pdb_ids`` in order of mention (T5: reference, target)."""

    pdb_ids: tuple[str, ...] = ()
    ligands: tuple[str, ...] = ()
    residue: ResidueRef | None = None
    bond: BondRef | None = None
    options: dict[str, str] = field(default_factory=dict)
    ligand_atoms: tuple[str, ...] = ()

    @property
    def pdb_id(self) -> str | None:
        return self.pdb_ids[0] if self.pdb_ids else None

    @property
    def ligand(self) -> str | None:
        return self.ligands[0] if self.ligands else None


def parse_residue_number(text: str) -> tuple[int, str]:
    """``45`` → (45, ""), ``45A`` → (45, "A"), ``-3`` → (-3, "")."""
    m = re.fullmatch(r"(-?\d+)([A-Za-z]?)", text.strip())
    if not m:
        raise DetailsError(f"{text!r} is not a residue number")
    return int(m.group(1)), m.group(2).upper()


def residue_ref(name: str, number: str | int, chain: str) -> ResidueRef:
    num, ins = parse_residue_number(str(number))
    return ResidueRef(name.upper(), num, ins, str(chain))


def _unique(items) -> tuple:
    return tuple(dict.fromkeys(items))


def read_details(text: str) -> QuestionDetails:
    """The details a question's text states (missing ones stay empty)."""
    pdb_ids = _unique(m.group(1).lower() for m in _PDB.finditer(text))
    ligands = _unique(m.group(1) for m in _LIGAND.finditer(text) if m.group(1) not in _NOT_LIGAND_CODES
                      and not re.fullmatch(r"\d+", m.group(1)))
    bond = None
    m = _T8_BOND.search(text)
    if m:
        bond = BondRef(residue_ref(m.group(2), m.group(3), m.group(1)), m.group(4), m.group(5))
    residue = bond.residue if bond else None
    if residue is None:
        m = _T4_RESIDUE.search(text)
        if m:
            residue = residue_ref(m.group(1), m.group(2), m.group(3)) if m.group(1) else \
                residue_ref(m.group(5), m.group(6), m.group(4))
    options = {m.group(1): m.group(2) for m in _OPTION.finditer(text)}
    atoms: list[str] = []
    if bond:
        atoms.append(bond.ligand_atom)
    for m in _ATOM_NAME.finditer(text):
        atoms.extend(a for a in re.split(r"\s*(?:,|and)\s*", m.group(1)) if a)
    return QuestionDetails(pdb_ids, ligands, residue, bond, options, _unique(atoms))


def require(details: QuestionDetails, task: str, *, pdb: bool = True, residue: bool = False,
            bond: bool = False, options: bool = False) -> None:
    """Raise :class:`DetailsError` naming what the question text lacks for ``task``."""
    missing = []
    if pdb and not details.pdb_id:
        missing.append("a PDB ID ('PDB entry 1ABC')")
    if residue and details.residue is None:
        missing.append("the residue ('ARG 45 of chain A')")
    if bond and details.bond is None:
        missing.append("the H-bond ('chain A, LYS 47 NZ ... ligand atom O1A')")
    if options and len(details.options) != 4:
        missing.append("four options 'A. ...' to 'D. ...'")
    if missing:
        raise DetailsError(f"the {task} question does not state {', '.join(missing)}")
