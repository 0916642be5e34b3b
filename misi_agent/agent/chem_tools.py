"""Chemistry tools for the agent: the entry's structure, its H-bonds, PLIP's interactions.

Each tool takes what the question states (PDB ID, ligand code, residue, ligand atom names),
finds the complex the pictures show (:meth:`AgentContext.complex`: the ligand is chosen
from the question's statements, never from a manifest or a question's metadata) and runs
the project's engines:

* ``structure_info``: which file, which ligand (and why), its atom names, the pocket residues;
* ``residue_hbonds``: H-bonds between one named residue and the ligand, with the
  residue–ligand answer (``No`` or ``Yes: ARG NH2, O1B; ...``);
* ``pocket_hbonds``: every pocket–ligand H-bond, with the pocket–ligand answer
  (``ARG 45 NH2 A, O1B; ...``);
* ``plip_interactions``: PLIP's interaction list (in its own worker process).

H-bonds come from :func:`misi_agent.tools.hbonds.find_hbonds` (ChimeraX's relaxed criteria,
the benchmark's ground-truth rule), each (residue, protein atom, ligand atom) pair once,
protein atom first whichever side donates; answers are written by
:mod:`misi_agent.tools.hbond_format` in the benchmark's answer forms.
"""
from __future__ import annotations

import importlib.util
import re
from typing import Any

from misi_agent.agent.context import AgentContext, LigandChoice
from misi_agent.agent.details import ResidueRef, parse_residue_number
from misi_agent.agent.registry import Tool, ToolError, to_jsonable
from misi_agent.agent.toolset import PLIP_INTERACTIONS, POCKET_HBONDS, RESIDUE_HBONDS, STRUCTURE_INFO
from misi_agent.structure import Complex, ResidueKey

HBOND_MODE = "relaxed"  # ChimeraX's default criteria: the benchmark's ground truth
_RESIDUE_RE = re.compile(r"^\s*([A-Za-z]{3})\s*(-?\d+[A-Za-z]?)\s*$")

_PDB = {"type": "string", "pattern": "^[0-9][A-Za-z0-9]{3}$", "description": "PDB ID stated in the question, e.g. 6YQW"}
_LIG = {"type": "string", "pattern": "^[A-Za-z0-9]{1,5}$", "description": "ligand code stated in the question, e.g. 82I"}
_ATOMS = {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9'\"*]{1,5}$"}, "maxItems": 50,
          "description": "ligand atom names the question mentions (help pick the ligand shown)"}
_RES = {"type": "string", "pattern": r"^\s*[A-Za-z]{3}\s*-?\d+[A-Za-z]?\s*$",
        "description": "residue name and number as labelled, e.g. 'ARG 45' (insertion code appended: 'ARG 45A')"}
_CHAIN = {"type": "string", "pattern": "^[A-Za-z0-9]{1,4}$", "description": "chain ID stated in the question"}


def _residue_ref(residue: str, chain: str) -> ResidueRef:
    m = _RESIDUE_RE.match(residue)
    if not m:
        raise ToolError(f"{residue!r} is not a residue like 'ARG 45'")
    number, ins = parse_residue_number(m.group(2))
    return ResidueRef(m.group(1).upper(), number, ins, chain)


def _ligand_summary(cx: Complex, choice: LigandChoice) -> dict[str, Any]:
    return {"code": cx.ligand_code, "chain": cx.ligand_key.chain, "number": cx.ligand_key.number,
            "n_atoms": int(cx.ligand.array_length()), "atom_names": [str(n) for n in cx.ligand.atom_name],
            "chosen_because": choice.reason, "bond_orders": cx.bond_orders}


def engine_hbonds(cx: Complex) -> tuple[list, list]:
    """(each pair once, every bond found) of the engine. A pair found in both directions is one
    bond; the unique list is ordered by chain, residue number, insertion code, protein and ligand atom."""
    from misi_agent.tools.hbonds import find_hbonds

    bonds = find_hbonds(cx, mode=HBOND_MODE)
    seen, out = set(), []
    for hb in sorted(bonds, key=lambda b: (str(b.chain), int(b.residue_number), str(b.insertion_code or ""),
                                           int(b.protein_index), int(b.ligand_index))):
        key = (_key_of(hb), str(hb.protein_atom), str(hb.ligand_atom))
        if key not in seen:
            seen.add(key)
            out.append(hb)
    return out, list(bonds)


def _key_of(hb) -> ResidueKey:
    return ResidueKey(str(hb.chain), int(hb.residue_number), str(hb.insertion_code or ""), str(hb.residue_name))


def bond_record(hb, sides: set[str] | None = None) -> dict[str, Any]:
    """What the model reads about one bond: who, which atoms, who donates, how far, which criteria."""
    rec: dict[str, Any] = {"residue": f"{hb.residue_name} {int(hb.residue_number)}{hb.insertion_code or ''}",
                           "chain": str(hb.chain), "protein_atom": str(hb.protein_atom),
                           "ligand_atom": str(hb.ligand_atom)}
    donor = getattr(hb, "donor", None)
    if sides and len(sides) > 1:
        donor = "both"
    if donor:
        rec["donor"] = donor
    for attr, name in (("distance", "donor_acceptor_distance"), ("h_distance", "h_acceptor_distance")):
        value = getattr(hb, attr, None)
        if isinstance(value, (int, float)):
            rec[name] = round(float(value), 2)
    if getattr(hb, "group", None):
        rec["criteria"] = str(hb.group)
    return rec


def _records(bonds: list, all_bonds: list) -> list[dict[str, Any]]:
    sides: dict[tuple, set[str]] = {}
    for hb in all_bonds:
        sides.setdefault((_key_of(hb), str(hb.protein_atom), str(hb.ligand_atom)), set()).add(str(getattr(hb, "donor", "")))
    return [bond_record(hb, sides.get((_key_of(hb), str(hb.protein_atom), str(hb.ligand_atom)))) for hb in bonds]


def agent_tools(context: AgentContext) -> list[Tool]:
    """The chemistry tools bound to one question's context."""

    def from_images(pdb_id: str, solve, **kwargs) -> dict[str, Any]:
        """The H-bond task answered from the question's six views (image-only grounding)."""
        try:
            from misi_agent.tools import image_hbonds as IH
        except ImportError:  # the image-only H-bond module is not installed
            raise ToolError("image-only grounding is not available for this tool (no image H-bond module)") from None
        from misi_agent.camera import VIEW_NAMES

        views = {v: context.image(k + 1) for k, v in enumerate(VIEW_NAMES) if k < len(context.images)}
        out = getattr(IH, solve)(views, **kwargs).to_dict()
        context.used(pdb_id, "images")
        return out

    def structure_info(pdb_id: str, ligand: str | None = None, ligand_atoms: list[str] | None = None,
                       residue: str | None = None, chain: str | None = None) -> dict[str, Any]:
        ref = _residue_ref(residue, chain) if residue and chain else None
        cx, choice = context.complex(pdb_id, code=ligand, atom_names=ligand_atoms or (), residue=ref)
        entry = context.entry(pdb_id)
        return {"pdb_id": cx.pdb_id.upper(), "file": entry.path.name, "ligand": _ligand_summary(cx, choice),
                "other_ligand_candidates": [c.to_dict() for c in choice.candidates if c != choice.chosen],
                "pocket_residues": [f"{k.label()} {k.chain}" for k in cx.residues()], "notes": list(cx.notes)}

    def residue_hbonds(pdb_id: str, residue: str, chain: str, ligand: str | None = None,
                       ligand_atoms: list[str] | None = None) -> dict[str, Any]:
        from misi_agent.tools.hbond_format import format_residue_answer

        ref = _residue_ref(residue, chain)
        if context.image_grounded(pdb_id):
            return from_images(pdb_id, "residue_hbonds_from_images", residue=residue, chain=chain)
        cx, choice = context.complex(pdb_id, code=ligand, atom_names=ligand_atoms or (), residue=ref, shows="residue")
        key = ResidueKey(ref.chain, ref.number, ref.ins_code, ref.name)
        in_pocket = key in set(cx.residues())
        if not in_pocket:
            same_number = [k for k in cx.residues() if k.chain == ref.chain and k.number == ref.number]
            if same_number:
                raise ToolError(f"residue {ref.number}{ref.ins_code} of chain {ref.chain} is "
                                f"{same_number[0].name}, not {ref.name}")
        unique, every = engine_hbonds(cx) if in_pocket else ([], [])
        mine = [hb for hb in unique if _key_of(hb) == key]
        return {"residue": ref.label(), "chain": ref.chain, "in_pocket": in_pocket,
                "ligand": {k: v for k, v in _ligand_summary(cx, choice).items() if k != "atom_names"},
                "n_bonds": len(mine), "bonds": _records(mine, every),
                "answer": format_residue_answer(mine)}

    def pocket_hbonds(pdb_id: str, ligand: str | None = None, ligand_atoms: list[str] | None = None) -> dict[str, Any]:
        from misi_agent.tools.hbond_format import format_pocket_ligand

        if context.image_grounded(pdb_id):
            return from_images(pdb_id, "pocket_hbonds_from_images")
        cx, choice = context.complex(pdb_id, code=ligand, atom_names=ligand_atoms or ())
        unique, every = engine_hbonds(cx)
        return {"ligand": {k: v for k, v in _ligand_summary(cx, choice).items() if k != "atom_names"},
                "n_bonds": len(unique), "bonds": _records(unique, every),
                "answer": format_pocket_ligand(unique) or "None"}

    def plip(pdb_id: str, ligand: str | None = None, ligand_atoms: list[str] | None = None) -> Any:
        from misi_agent.tools.plip_tool import plip_interactions

        cx, _ = context.complex(pdb_id, code=ligand, atom_names=ligand_atoms or ())
        return plip_interactions(cx)

    lig_props = {"pdb_id": _PDB, "ligand": _LIG, "ligand_atoms": _ATOMS}
    tools = [
        Tool(STRUCTURE_INFO,
             "Look up the PDB entry the question names: which ligand the pictures show (chosen from the ligand "
             "code, ligand atom names and residue the question states), the ligand's atom names and the pocket "
             "residues (name, number, chain).",
             {"type": "object", "properties": {**lig_props, "residue": _RES, "chain": _CHAIN},
              "required": ["pdb_id"], "additionalProperties": False},
             "the file, the chosen ligand (code, chain, number, atom names, why it was chosen), other ligand "
             "candidates, and the pocket residues as 'ARG 45 A'.",
             structure_info),
    ]
    if importlib.util.find_spec("misi_agent.tools.hbonds") is not None:
        tools += [
            Tool(RESIDUE_HBONDS,
                 "Hydrogen bonds between one residue and the ligand, computed from the entry's 3D structure with "
                 "ChimeraX's relaxed criteria (donor/acceptor typing and H-bond geometry, not just distance). "
                 "Use it for residue-ligand interaction questions.",
                 {"type": "object", "properties": {**lig_props, "residue": _RES, "chain": _CHAIN},
                  "required": ["pdb_id", "residue", "chain"], "additionalProperties": False},
                 "the bonds (residue atom, ligand atom, donor side, distances) and 'answer' in the residue-ligand "
                 "format: 'No' or 'Yes: ARG NH2, O1B; ARG NE, O2G'.",
                 residue_hbonds),
            Tool(POCKET_HBONDS,
                 "Every hydrogen bond between the binding pocket and the ligand, computed from the entry's 3D "
                 "structure with ChimeraX's relaxed criteria. Use it for pocket-ligand interaction questions.",
                 {"type": "object", "properties": lig_props, "required": ["pdb_id"], "additionalProperties": False},
                 "the bonds and 'answer' in the pocket-ligand format: 'ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A'.",
                 pocket_hbonds),
        ]
    if importlib.util.find_spec("misi_agent.tools.plip_tool") is not None:
        tools.append(Tool(PLIP_INTERACTIONS,
                          "All non-covalent interactions PLIP 3.0.1 finds between the pocket and the ligand "
                          "(H-bonds with PLIP's looser criteria, hydrophobic contacts, pi-stacking, pi-cation, salt "
                          "bridges, halogen bonds, water bridges, metal complexes). Slower; a second opinion.",
                          {"type": "object", "properties": lig_props, "required": ["pdb_id"],
                           "additionalProperties": False},
                          "PLIP's interactions by type, with residue and atom names.", plip))
    return tools
