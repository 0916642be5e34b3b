"""Alternative H-bond knowledge for the agent's two H-bond tools (the knowledge ablation).

The paper's conclusion is that models match spatial proximity, not chemistry; this module
lets the same planner answer H-bond questions with three kinds of knowledge, so the effect
of chemistry can be measured with everything else fixed:

* ``chimerax``: the project's ChimeraX-compatible engine (:func:`misi_agent.tools.hbonds.find_hbonds`,
  relaxed criteria: donor/acceptor typing plus H-bond geometry). The benchmark's ground
  truth is made with the same rule, so this arm is the reference, not a competitor.
* ``distance``: proximity only, the rule the paper says models fall back to: every
  pocket N/O atom within :data:`DISTANCE_CUTOFF` Å of a ligand N/O atom is an H-bond, with
  no donor/acceptor typing and no angles.
* ``plip``: PLIP 3.0.1's H-bonds (Open Babel hydrogens, its own distance and angle
  cut-offs), run in PLIP's worker process (:func:`misi_agent.tools.plip_tool.plip_interactions`).

:func:`hbond_tools` builds ``residue_hbonds`` and ``pocket_hbonds`` tools with the same
names, inputs and answer forms as :mod:`misi_agent.agent.chem_tools`, computed with one
criterion; :func:`build_variant_registry` puts them in place of the default ones, so the
router (or any planner) runs unchanged. :func:`residue_result` and :func:`pocket_result`
are the pure functions behind the tools (also used for oracle tool outputs, which are
computed on the true complex).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from misi_agent.agent.registry import Registry, Tool, ToolError
from misi_agent.agent.toolset import POCKET_HBONDS, RESIDUE_HBONDS, build_registry
from misi_agent.errors import MisiError
from misi_agent.structure import Complex, ResidueKey

CRITERIA = ("chimerax", "distance", "plip")
DEFAULT_CRITERION = "chimerax"
DISTANCE_CUTOFF = 3.5  # Å, N/O to N/O
POLAR = frozenset({"N", "O"})
DESCRIPTIONS = {
    "chimerax": "ChimeraX's relaxed H-bond criteria (donor/acceptor typing and H-bond geometry)",
    "distance": f"a distance-only rule (any N/O pair within {DISTANCE_CUTOFF} Å; no donor/acceptor typing, no angles)",
    "plip": "PLIP 3.0.1's H-bond detection (Open Babel hydrogens, PLIP's distance and angle cut-offs)",
}
_RESIDUE_RE = re.compile(r"^\s*([A-Za-z]{3})\s*(-?\d+)([A-Za-z]?)\s*$")


class CriterionError(MisiError):
    """An unknown H-bond criterion (one-line message)."""


def check_criterion(name: str) -> str:
    """``name`` when it is one of :data:`CRITERIA`, else :class:`CriterionError`."""
    if name not in CRITERIA:
        raise CriterionError(f"unknown H-bond criterion {name!r} (expected one of {', '.join(CRITERIA)})")
    return name


@dataclass(frozen=True)
class ProximityBond:
    """A pocket–ligand N/O pair within the cut-off (the distance-only 'H-bond')."""

    residue_name: str
    residue_number: int
    insertion_code: str
    chain: str
    protein_atom: str
    ligand_atom: str
    distance: float
    protein_index: int
    ligand_index: int
    donor: str | None = None  # unknown: proximity says nothing about who donates


def distance_hbonds(cx: Complex, cutoff: float = DISTANCE_CUTOFF) -> list[ProximityBond]:
    """Every pocket N/O – ligand N/O pair within ``cutoff`` Å (heavy atoms), in pocket then ligand order."""
    pocket, ligand = cx.pocket, cx.ligand
    p_idx = np.flatnonzero(np.isin(np.char.upper(pocket.element.astype(str)), list(POLAR)))
    l_idx = np.flatnonzero(np.isin(np.char.upper(ligand.element.astype(str)), list(POLAR)))
    if not len(p_idx) or not len(l_idx):
        return []
    d = np.linalg.norm(pocket.coord[p_idx][:, None, :] - ligand.coord[l_idx][None, :, :], axis=2)
    out = []
    for i, j in zip(*np.nonzero(d <= cutoff)):
        pi, lj = int(p_idx[i]), int(l_idx[j])
        out.append(ProximityBond(str(pocket.res_name[pi]), int(pocket.res_id[pi]), str(pocket.ins_code[pi] or ""),
                                 str(pocket.chain_id[pi]), str(pocket.atom_name[pi]), str(ligand.atom_name[lj]),
                                 round(float(d[i, j]), 3), pi, lj))
    return out


def chimerax_hbonds(cx: Complex) -> list:
    """The engine's bonds (relaxed criteria), each (residue, protein atom, ligand atom) once."""
    from misi_agent.agent.chem_tools import engine_hbonds

    return engine_hbonds(cx)[0]


def plip_hbonds(cx: Complex) -> list:
    """PLIP's H-bonds of the complex's ligand copy (run in PLIP's worker process)."""
    from misi_agent.tools.plip_tool import plip_interactions

    return list(plip_interactions(cx).hbonds)


FINDERS: dict[str, Callable[[Complex], list]] = {
    "chimerax": chimerax_hbonds,
    "distance": distance_hbonds,
    "plip": plip_hbonds,
}


def find_bonds(cx: Complex, criterion: str) -> list:
    """The pocket–ligand H-bonds of ``cx`` by ``criterion``, each (residue, protein atom, ligand atom) once."""
    bonds = FINDERS[check_criterion(criterion)](cx)
    seen, out = set(), []
    for b in sorted(bonds, key=lambda b: (str(b.chain), int(b.residue_number), str(b.insertion_code or ""),
                                          str(b.protein_atom), str(b.ligand_atom))):
        k = (_key_of(b), str(b.protein_atom), str(b.ligand_atom))
        if k not in seen:
            seen.add(k)
            out.append(b)
    return out


def _key_of(b) -> ResidueKey:
    return ResidueKey(str(b.chain), int(b.residue_number), str(b.insertion_code or ""), str(b.residue_name))


def _record(b) -> dict[str, Any]:
    rec: dict[str, Any] = {"residue": f"{b.residue_name} {int(b.residue_number)}{b.insertion_code or ''}",
                           "chain": str(b.chain), "protein_atom": str(b.protein_atom),
                           "ligand_atom": str(b.ligand_atom)}
    if getattr(b, "donor", None):
        rec["donor"] = str(b.donor)
    if isinstance(getattr(b, "distance", None), (int, float)):
        rec["donor_acceptor_distance"] = round(float(b.distance), 2)
    return rec


def _ligand(cx: Complex) -> dict[str, Any]:
    return {"code": cx.ligand_code, "chain": cx.ligand_key.chain, "number": cx.ligand_key.number}


def residue_result(cx: Complex, residue: ResidueKey, criterion: str) -> dict[str, Any]:
    """What ``residue_hbonds`` returns for one residue of ``cx`` under ``criterion`` (answer: ``No`` / ``Yes: ...``)."""
    from misi_agent.tools.hbond_format import format_residue_answer

    in_pocket = residue in set(cx.residues())
    if not in_pocket:
        same = [k for k in cx.residues() if k.chain == residue.chain and k.number == residue.number]
        if same:
            raise ToolError(f"residue {residue.number}{residue.ins_code} of chain {residue.chain} is {same[0].name}, "
                            f"not {residue.name}")
    mine = [b for b in find_bonds(cx, criterion) if _key_of(b) == residue] if in_pocket else []
    return {"residue": f"{residue.name} {residue.number}{residue.ins_code}", "chain": residue.chain,
            "in_pocket": in_pocket, "ligand": _ligand(cx), "criterion": criterion, "n_bonds": len(mine),
            "bonds": [_record(b) for b in mine], "answer": format_residue_answer(mine)}


def pocket_result(cx: Complex, criterion: str) -> dict[str, Any]:
    """What ``pocket_hbonds`` returns for ``cx`` under ``criterion`` (answer: ``ARG 45 NH2 A, O1B; ...``)."""
    from misi_agent.tools.hbond_format import format_pocket_ligand

    bonds = find_bonds(cx, criterion)
    return {"ligand": _ligand(cx), "criterion": criterion, "n_bonds": len(bonds),
            "bonds": [_record(b) for b in bonds], "answer": format_pocket_ligand(bonds) or "None"}


def parse_residue(residue: str, chain: str) -> ResidueKey:
    """``'ARG 45'`` (or ``'ARG 45A'``) and a chain → :class:`ResidueKey`; a ToolError otherwise."""
    m = _RESIDUE_RE.match(residue or "")
    if not m:
        raise ToolError(f"{residue!r} is not a residue like 'ARG 45'")
    return ResidueKey(str(chain), int(m.group(2)), m.group(3).upper(), m.group(1).upper())


def hbond_tools(context, criterion: str, template: Registry | None = None) -> list[Tool]:
    """``residue_hbonds`` and ``pocket_hbonds`` computed with ``criterion``, bound to one question's context.

    Names, input schemas and answer forms are those of the default tools in ``template``
    (built from ``context`` when not given), so planners and their prompts see the same
    interface; descriptions name the criterion.
    """
    from misi_agent.agent.details import ResidueRef

    check_criterion(criterion)
    template = template if template is not None else build_registry(context)

    def residue_hbonds(pdb_id: str, residue: str, chain: str, ligand: str | None = None,
                       ligand_atoms: list[str] | None = None) -> dict[str, Any]:
        key = parse_residue(residue, chain)
        ref = ResidueRef(key.name, key.number, key.ins_code, key.chain)
        cx, _ = context.complex(pdb_id, code=ligand, atom_names=ligand_atoms or (), residue=ref, shows="residue")
        return residue_result(cx, key, criterion)

    def pocket_hbonds(pdb_id: str, ligand: str | None = None, ligand_atoms: list[str] | None = None) -> dict[str, Any]:
        cx, _ = context.complex(pdb_id, code=ligand, atom_names=ligand_atoms or ())
        return pocket_result(cx, criterion)

    out = []
    for name, func, what in ((RESIDUE_HBONDS, residue_hbonds, "between one residue and the ligand"),
                             (POCKET_HBONDS, pocket_hbonds, "between the binding pocket and the ligand")):
        if name not in template:
            raise ToolError(f"no default {name} tool to take the interface from (is misi_agent.tools.hbonds installed?)")
        base = template.get(name)
        out.append(Tool(name, f"Hydrogen bonds {what}, computed from the entry's 3D structure with "
                              f"{DESCRIPTIONS[criterion]}.", base.parameters, base.output, func))
    return out


def build_variant_registry(context, criterion: str = DEFAULT_CRITERION) -> Registry:
    """The question's full registry with the two H-bond tools computed by ``criterion``.

    For ``chimerax`` the tools are this module's (same engine as the default tools, with
    the criterion stated in their output), so the three arms of the ablation share one code path.
    """
    base = build_registry(context)
    variants = {t.name: t for t in hbond_tools(context, criterion, base)}
    reg = Registry()
    for name in base.names():
        reg.register(variants.get(name, base.get(name)))
    return reg
