"""The agent's tools in one place: their names, where they come from, one registry per question.

Tools come from *providers*: modules listed in :data:`TOOL_PROVIDERS` that define
``agent_tools(context) -> list[Tool]`` (the context is the question's
:class:`~misi_agent.agent.context.AgentContext`: images, structure store, grounding).
A provider module that is not installed yet is skipped; the router then stops with a
:class:`MissingToolError` naming the tool its program needs.

Chemistry tools (this package, :mod:`misi_agent.agent.chem_tools`): :data:`STRUCTURE_INFO`,
:data:`RESIDUE_HBONDS`, :data:`POCKET_HBONDS`, :data:`PLIP_INTERACTIONS`.

Spatial tools (expected from the perception tools, module :data:`SPATIAL_PROVIDER`): one
solver per geometric task, with the contract in :data:`SPATIAL_CONTRACTS`. Every solver
takes the question's PDB ID(s) and ligand code(s) as the text states them, the numbers of
the images it needs (1-based, in the task's image order) and, where the task has them, the
options or the named bond; it returns an object whose ``answer`` is the task's exact
answer string (``move x 3``, ``roll y 15``, ``move z 50``, ``roll x 75, move x -14`` or a
letter A-D) plus whatever evidence it has (scores, runner-up, residuals). A provider can
build such a tool with :func:`tool_from_contract`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from misi_agent.agent.registry import Registry, Tool
from misi_agent.bench import tasks as T
from misi_agent.errors import MisiError

# ----------------------------------------------------------------------------- names

STRUCTURE_INFO = "structure_info"
RESIDUE_HBONDS = "residue_hbonds"
POCKET_HBONDS = "pocket_hbonds"
PLIP_INTERACTIONS = "plip_interactions"

SOLVE_TRANSLATION = "solve_translation"
SOLVE_ROTATION = "solve_rotation"
SOLVE_ZOOM = "solve_zoom"
SOLVE_TRANSLATION_ROTATION = "solve_translation_rotation"
SOLVE_ROTATION_ROTATION = "solve_rotation_rotation"
SOLVE_DOCKING = "solve_docking"
LOCATE_INTERACTION = "locate_interaction"

CHEM_PROVIDER = "misi_agent.agent.chem_tools"
SPATIAL_PROVIDER = "misi_agent.tools.agent_tools"
TOOL_PROVIDERS: tuple[str, ...] = (CHEM_PROVIDER, SPATIAL_PROVIDER)


class MissingToolError(MisiError):
    """A planner's program needs a tool that no provider registered (one-line message)."""


# ----------------------------------------------------------------------------- spatial contracts


@dataclass(frozen=True)
class ToolContract:
    """Name, model-facing description, JSON-schema inputs and output of an expected tool."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    output: str


_PDB = {"type": "string", "pattern": "^[0-9][A-Za-z0-9]{3}$", "description": "PDB ID stated in the question"}
_LIG = {"type": "string", "description": "ligand code (CCD) stated in the question, if any"}


def _images(n_min: int, n_max: int, what: str) -> dict:
    return {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": n_min, "maxItems": n_max,
            "description": what}


def _contract(name: str, description: str, images: dict, extra: Mapping[str, Any] | None = None,
              required: tuple[str, ...] = ()) -> ToolContract:
    props: dict[str, Any] = {"pdb_id": _PDB, "ligand": _LIG, "images": images}
    props.update(extra or {})
    return ToolContract(
        name, description,
        {"type": "object", "properties": props, "required": ["pdb_id", "images", *required], "additionalProperties": False},
        "an object with 'answer' (the task's exact answer string) and the evidence: the best candidate's score, "
        "the runner-up and its score (confidence margin), and registration residuals.")


_OPTIONS = {"type": "object", "description": "the four options as the question writes them, keyed A-D",
            "properties": {k: {"type": "string"} for k in T.CHOICE_LETTERS},
            "required": list(T.CHOICE_LETTERS), "additionalProperties": False}
_BOND = {"type": "object", "description": "the H-bond the question names",
         "properties": {"chain": {"type": "string"}, "residue_name": {"type": "string"},
                        "residue_number": {"type": "string", "description": "number with insertion code, e.g. 47 or 47A"},
                        "residue_atom": {"type": "string"}, "ligand_atom": {"type": "string"}},
         "required": ["chain", "residue_name", "residue_number", "residue_atom", "ligand_atom"],
         "additionalProperties": False}

SPATIAL_CONTRACTS: dict[str, ToolContract] = {
    T.TRANSLATION: _contract(
        SOLVE_TRANSLATION,
        "Find the single move (x or y, whole Å) that takes the initial front view to the after-image, by "
        "registering the entry's 3D structure to the views and comparing every candidate move with the after-image.",
        _images(4, 4, "image numbers: initial front, left, top, then the front view after the move")),
    T.ROTATION: _contract(
        SOLVE_ROTATION,
        "Find the single roll (x, y or z; multiple of 15°) that takes the initial front view to the after-image, "
        "by analysis-by-synthesis against the entry's 3D structure.",
        _images(4, 4, "image numbers: initial front, left, top, then the front view after the roll")),
    T.ZOOMING: _contract(
        SOLVE_ZOOM,
        "Find how far (move z, whole Å) the scene was brought toward the camera, from the change of apparent scale "
        "between the initial front view and the after-image.",
        _images(4, 4, "image numbers: initial front, left, top, then the front view after the move")),
    T.TRANSLATION_ROTATION: _contract(
        SOLVE_TRANSLATION_ROTATION,
        "Infer the move f1 and the roll f2 that take the reference complex's front view to its after-image, apply "
        "them to the target complex and return the option image that matches.",
        _images(11, 11, "image numbers: reference front, left, top, reference after f2(f1), target front, left, top, "
                        "options A-D"),
        {"target_pdb_id": _PDB, "target_ligand": _LIG}, ("target_pdb_id",)),
    T.ROTATION_ROTATION: _contract(
        SOLVE_ROTATION_ROTATION,
        "Infer the two rolls that take the front view to the after-image, apply them again to the after-image's "
        "state and return the option image that matches.",
        _images(8, 8, "image numbers: front, left, top, after the two rolls, options A-D")),
    T.DOCKING: _contract(
        SOLVE_DOCKING,
        "Find the roll about the ligand's own centre and the move along x that put the displaced ligand back into "
        "its pocket (answer 'roll <axis> <angle>, move x <d>').",
        _images(7, 7, "image numbers: pocket front, left, top, displaced ligand front, left, top, both together")),
    T.INTERACTION_LOCATION: _contract(
        LOCATE_INTERACTION,
        "Compute the centroid of the named H-bond's two atoms in the front view and the move that brings it onto "
        "the line of sight through the image centre; return the matching option letter.",
        _images(6, 6, "image numbers: front, left, top, back, right, bottom views of the complex"),
        {"bond": _BOND, "options": _OPTIONS}, ("bond", "options")),
}


def tool_from_contract(contract: ToolContract, impl: Callable[..., Any]) -> Tool:
    """A :class:`Tool` with the contract's name, description and schema, calling ``impl(**arguments)``."""
    return Tool(contract.name, contract.description, contract.parameters, contract.output, impl)


# ----------------------------------------------------------------------------- the registry


def build_registry(context, providers: tuple[str, ...] = TOOL_PROVIDERS, extra: tuple[Tool, ...] = ()) -> Registry:
    """All tools the installed providers give for this question's context, plus ``extra``."""
    registry = Registry()
    for name in providers:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
                continue  # provider not written yet: its tools are simply absent
            raise
        factory = getattr(module, "agent_tools", None)
        if factory is None:
            continue
        for tool in factory(context):
            registry.register(tool)
    for tool in extra:
        registry.register(tool)
    return registry


def require_tool(available, name: str, task: str) -> None:
    """Raise :class:`MissingToolError` unless ``name`` is among ``available`` (names, or a Registry)."""
    names = available.names() if isinstance(available, Registry) else list(available)
    if name not in names:
        source = SPATIAL_PROVIDER if name in {c.name for c in SPATIAL_CONTRACTS.values()} else CHEM_PROVIDER
        raise MissingToolError(f"the {task} program needs tool {name!r}, which is not registered "
                               f"(expected from {source}); available: {', '.join(names) or 'none'}")
