"""The spatial tools as agent tools: one solver per geometric task, plus seeing atoms and registering.

This module is the agent's spatial provider (:data:`misi_agent.agent.toolset.SPATIAL_PROVIDER`):
:func:`agent_tools` builds, for one question's context, a tool for every contract in
:data:`misi_agent.agent.toolset.SPATIAL_CONTRACTS` (``solve_translation``, ``solve_rotation``,
``solve_zoom``, ``solve_translation_rotation``, ``solve_rotation_rotation``, ``solve_docking``,
``locate_interaction``) and two general ones, ``detect_atoms`` and ``register_structure``.

A solver tool gets what the question states (PDB ID, ligand code if any, image numbers, the
named bond, the options), reads the images by number, picks the complex the pictures show
(:func:`pick_complex`: the ligand the question's statements choose first, kept when the
structure registers to the task's first image of it; otherwise the entry's other ligands,
then groups usually skipped as additives, until one fits) and runs
:mod:`misi_agent.tools.geometric_tasks`. The output is the solver's
:class:`~misi_agent.tools.spatial_records.SpatialAnswer` as a dict (``answer``, ``score``,
``runner_up``, ``margin``, ``residual``, ``confident``, ``notes``, ...) plus which ligand was
used and why.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from misi_agent.agent.context import AgentContext, choose_ligand
from misi_agent.agent.registry import Tool, ToolError
from misi_agent.bench import tasks as T
from misi_agent.camera import VIEW_NAMES
from misi_agent.errors import MisiError
from misi_agent.knowledge import excluded_hetero_codes
from misi_agent.scene import scene_from_complex
from misi_agent.structure import Complex, ResidueKey, StructureError, load_complex, read_atoms
from misi_agent.tools import geometric_tasks as G
from misi_agent.tools.atom_detection import detect_atoms
from misi_agent.tools.registration import register

DETECT_ATOMS = "detect_atoms"
REGISTER_STRUCTURE = "register_structure"


@lru_cache(maxsize=16)
def _atoms(path: str):
    return read_atoms(path)


@lru_cache(maxsize=32)
def _load(path: str, key: ResidueKey | None, code: str | None, pdb_id: str) -> Complex:
    if key is not None:
        return load_complex(path, ligand_key=key, pdb_id=pdb_id)
    return load_complex(path, ligand=code, pdb_id=pdb_id)


def _candidates(context: AgentContext, pdb_id: str, ligand: str | None, atom_names=()):
    """(complex, why) for every ligand of the entry that the pictures could show, in the order tried.

    First the candidate the question's statements choose (:func:`choose_ligand`: the ligand
    code and atom names stated, else the largest organic group), then the entry's other
    organic candidates (same code first, larger first), then groups the structure reader
    counts as crystallisation additives (e.g. a sugar), which can still be what is shown.
    Complexes are loaded lazily: most questions need only the first.
    """
    entry = context.entry(pdb_id)  # respects the context's grounding mode
    path = str(entry.path)
    atoms = _atoms(path)
    try:
        choice = choose_ligand(atoms, code=ligand, atom_names=atom_names, source=path)
    except ToolError:
        choice = None
    if choice is not None:
        order = [choice.chosen] + sorted((c for c in choice.candidates if c.key != choice.chosen.key),
                                         key=lambda c: (c.key.name != choice.chosen.key.name, -c.n_atoms))
        for k, c in enumerate(order):
            why = choice.reason if k == 0 else f"{c.key.name} {c.key.chain} {c.key.number}: the first choice did not fit"
            try:
                yield _load(path, c.key, None, entry.pdb_id), why
            except (StructureError, MisiError):
                continue
    additives = excluded_hetero_codes()["additives"]
    codes = sorted({str(n) for n, h in zip(atoms.res_name, atoms.hetero) if h and str(n) in additives})
    for code in codes:
        try:
            yield _load(path, None, code, entry.pdb_id), f"{code}: a group usually skipped as an additive fits the image"
        except (StructureError, MisiError):
            continue


def pick_complex(context: AgentContext, pdb_id: str, ligand: str | None, image: int, register_fn,
                 atom_names=()) -> tuple[Complex, str]:
    """The ligand (and so the pocket) of the entry that the image shows.

    The candidates of :func:`_candidates` are registered in turn to image ``image`` with
    ``register_fn`` (the task's registration; for the front view first without the framing
    search, which is what costs time when a candidate is the wrong ligand) and the first that
    fits is kept: the picture
    decides between copies and ligands, which no statement of a code-less question can. If
    none fits, the best fitting one (lowest chamfer cost) is kept and the solver will report
    that it is unsure.
    """
    path = context.image(image)
    candidates = _candidates(context, pdb_id, ligand, atom_names)
    if register_fn is G.register_front:  # first a cheap pass in the benchmark's framing over every candidate
        seen = []
        for cx, why in candidates:
            if G.register_front_quick(cx, path).record.ok:
                return cx, why
            seen.append((cx, why))
        candidates = seen
    tried = []
    for cx, why in candidates:
        reg = register_fn(cx, path)
        tried.append((reg.record.chamfer_px, cx, why))
        if reg.record.ok:
            return cx, why
    if not tried:
        raise ToolError(f"no ligand of {pdb_id.upper()} could be loaded")
    tried.sort(key=lambda t: t[0])
    return tried[0][1], tried[0][2] + " (no candidate fits the image well)"


def _describe(cx: Complex, why: str) -> dict[str, Any]:
    return {"code": cx.ligand_code, "chain": cx.ligand_key.chain, "number": cx.ligand_key.number,
            "chosen_because": why}


def agent_tools(context: AgentContext) -> list[Tool]:
    """The spatial tools bound to one question's context (its images and structure store)."""
    from misi_agent.agent.toolset import SPATIAL_CONTRACTS, tool_from_contract

    def images_of(numbers: list[int]) -> list:
        return [context.image(n) for n in numbers]

    def checked(task: str, images: list[int]) -> list:
        n = T.task_info(task).n_images
        if len(images) != n:
            raise ToolError(f"{task} needs its {n} images in the task's order, got {len(images)}")
        return images_of(images)

    def run(task: str, pdb_id: str, ligand, images: list[int], solve, register_fn=G.register_front, anchor: int = 1,
            atom_names=(), from_images=None):
        ims = checked(task, images)
        if from_images is not None and context.image_grounded(pdb_id):  # no structure: reconstruct from the views
            from misi_agent.tools import image_tasks as IT

            out = IT.SOLVERS[task](ims, **from_images).to_dict()
            context.used(pdb_id, "images")
            return out
        cx, why = pick_complex(context, pdb_id, ligand, images[anchor - 1], register_fn, atom_names)
        out = solve(ims, cx).to_dict()
        out["ligand"] = _describe(cx, why)
        return out

    def solve_translation(pdb_id: str, images: list[int], ligand: str | None = None):
        return run(T.TRANSLATION, pdb_id, ligand, images, G.solve_translation, from_images={})

    def solve_rotation(pdb_id: str, images: list[int], ligand: str | None = None):
        return run(T.ROTATION, pdb_id, ligand, images, G.solve_rotation, from_images={})

    def solve_zoom(pdb_id: str, images: list[int], ligand: str | None = None):
        return run(T.ZOOMING, pdb_id, ligand, images, G.solve_zoom, from_images={})

    def solve_translation_rotation(pdb_id: str, images: list[int], target_pdb_id: str, ligand: str | None = None,
                                   target_ligand: str | None = None):
        ims = checked(T.TRANSLATION_ROTATION, images)
        if context.image_grounded(pdb_id) or context.image_grounded(target_pdb_id):  # both from the views
            from misi_agent.tools import image_tasks as IT

            out = IT.solve_translation_rotation(ims).to_dict()
            context.used(pdb_id, "images")
            context.used(target_pdb_id, "images")
            return out
        target, twhy = pick_complex(context, target_pdb_id, target_ligand, images[4], G.register_front)
        out = run(T.TRANSLATION_ROTATION, pdb_id, ligand, images,
                  lambda ims_, cx: G.solve_translation_rotation(ims_, cx, target))
        out["target_ligand"] = _describe(target, twhy)
        return out

    def solve_rotation_rotation(pdb_id: str, images: list[int], ligand: str | None = None):
        return run(T.ROTATION_ROTATION, pdb_id, ligand, images, G.solve_rotation_rotation, from_images={})

    def solve_docking(pdb_id: str, images: list[int], ligand: str | None = None):
        return run(T.DOCKING, pdb_id, ligand, images, G.solve_docking, register_fn=G.register_pocket, from_images={})

    def locate_interaction(pdb_id: str, images: list[int], bond: dict, options: dict, ligand: str | None = None):
        names = (bond["ligand_atom"],) if bond.get("ligand_atom") else ()
        return run(T.INTERACTION_LOCATION, pdb_id, ligand, images,
                   lambda ims_, cx: G.locate_interaction(ims_, cx, bond, options), atom_names=names,
                   from_images={"bond": bond, "options": options})

    impls = {
        T.TRANSLATION: solve_translation,
        T.ROTATION: solve_rotation,
        T.ZOOMING: solve_zoom,
        T.TRANSLATION_ROTATION: solve_translation_rotation,
        T.ROTATION_ROTATION: solve_rotation_rotation,
        T.DOCKING: solve_docking,
        T.INTERACTION_LOCATION: locate_interaction,
    }
    tools = [tool_from_contract(SPATIAL_CONTRACTS[task], impl) for task, impl in impls.items()]

    def detect(image: int):
        return detect_atoms(context.image(image)).to_dict()

    def register_structure(pdb_id: str, image: int, view: str = "front", ligand: str | None = None):
        def reg_view(cx, path):
            rec, cam = register(scene_from_complex(cx, view), path)
            return G.Registered(None, None, rec, cam)

        cx, why = pick_complex(context, pdb_id, ligand, image, reg_view)
        rec, _ = register(scene_from_complex(cx, view), context.image(image))
        out = rec.to_dict()
        out["ligand"] = _describe(cx, why)
        return out

    _pdb = {"type": "string", "pattern": "^[0-9][A-Za-z0-9]{3}$", "description": "PDB ID stated in the question"}
    _img = {"type": "integer", "minimum": 1, "description": "image number as the question counts them (1-based)"}
    tools += [
        Tool(DETECT_ATOMS,
             "See the atoms in one image: the ligand's balls (centre and radius in pixels, colour class O, N, "
             "LIGAND_C or OTHER), the pixel count of every colour class (pocket sticks are POCKET_C0 purple and "
             "POCKET_C1 orange), the stick half-width and the background. Works on the pixels alone; labels are "
             "ignored.",
             {"type": "object", "properties": {"image": _img}, "required": ["image"], "additionalProperties": False},
             "the detected atoms and class pixel counts.", detect),
        Tool(REGISTER_STRUCTURE,
             "Check that the entry's 3D structure is what an image shows: fit the benchmark camera (30° field of "
             "view) to the image in the named canonical view and report how well it fits (residual in pixels, "
             "share of atoms matched, ok) and which detected balls are which ligand atoms.",
             {"type": "object", "properties": {"pdb_id": _pdb, "image": _img,
                                               "view": {"type": "string", "enum": list(VIEW_NAMES)},
                                               "ligand": {"type": "string"}},
              "required": ["pdb_id", "image"], "additionalProperties": False},
             "the registration: camera shift (Å), residual_px, matched, explained, ok, ligand atom correspondences.",
             register_structure),
    ]
    return tools
