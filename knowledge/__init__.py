"""Explicit chemistry knowledge as data files with sources, plus loaders that validate them.

Every threshold, template and list the tools use lives in a YAML file beside this module,
so a chemist can change a criterion by editing data, not code.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

from misi_agent.errors import MisiError

KNOWLEDGE_DIR = Path(__file__).resolve().parent
# The twenty standard amino acids (IUPAC-IUBMB three-letter codes): the residues a protein pocket is made of, the
# ones the residue templates, OpenMM's hydrogen definitions and the label reader's vocabulary all start from.
STANDARD_RESIDUES = ("ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS", "ILE", "LEU", "LYS", "MET", "PHE",
                     "PRO", "SER", "THR", "TRP", "TYR", "VAL")


class KnowledgeError(MisiError):
    """A knowledge table is missing, malformed or inconsistent."""


def read_table(name: str, directory: Path | None = None) -> dict:
    """Read one YAML table from the knowledge directory (or ``directory``)."""
    path = (directory or KNOWLEDGE_DIR) / name
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise KnowledgeError(f"cannot read knowledge table {path}: {exc}") from None
    if not isinstance(data, dict):
        raise KnowledgeError(f"knowledge table {path} must be a mapping")
    return data


@lru_cache(maxsize=None)
def excluded_hetero_codes() -> dict[str, frozenset[str]]:
    """Codes of water, ions and crystallisation additives, by category (validated)."""
    table = read_table("hetero_groups.yaml")
    out: dict[str, frozenset[str]] = {}
    for category in ("water", "ions", "additives"):
        entry = table.get(category)
        if not isinstance(entry, dict) or not entry.get("source") or not isinstance(entry.get("codes"), list):
            raise KnowledgeError(f"hetero_groups.yaml: '{category}' needs a source and a list of codes")
        out[category] = frozenset(str(c).upper() for c in entry["codes"])
    return out
