"""``router``: the deterministic planner, one fixed program of tool calls per task.

It needs no model weights (the embedded default). It reads the question's text exactly as a
model would (:func:`misi_agent.agent.details.read_details`: PDB ID, ligand code, named
residue, named bond, options), calls the task's tool, and answers with the tool's
``answer``. Programs:

=============================  =============================================================
task                           program
=============================  =============================================================
residue_ligand_interaction     ``residue_hbonds(pdb_id, residue, chain, ligand)`` → its answer
pocket_ligand_interaction      ``pocket_hbonds(pdb_id, ligand)`` → its answer
translation, rotation,         the task's spatial solver (:data:`~misi_agent.agent.toolset.SPATIAL_CONTRACTS`)
zooming, translation_rotation, with the PDB ID(s), ligand code(s), image numbers and, for
rotation_rotation, docking,    interaction location, the named bond and the four options
interaction_location           → its answer
=============================  =============================================================

A tool the program needs but no provider registered is a :class:`MissingToolError`; a tool
error ends the program with that error (the router has no other way to the answer).
"""
from __future__ import annotations

import json
from typing import Any

from misi_agent.agent.details import QuestionDetails, read_details, require
from misi_agent.agent.parsing import ToolCall
from misi_agent.agent.planners.base import Planner, PlannerError, PlannerInput, PlannerReply, image_paths, user_text
from misi_agent.agent.toolset import POCKET_HBONDS, RESIDUE_HBONDS, SPATIAL_CONTRACTS, require_tool
from misi_agent.bench import tasks as T


def _tool_names(inp: PlannerInput) -> list[str]:
    return [spec["function"]["name"] for spec in inp.tools]


def _last_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The decoded tool results that follow the last assistant turn."""
    out = []
    for m in reversed(messages):
        if m.get("role") != "tool":
            break
        try:
            out.append(json.loads(m.get("content") or "{}"))
        except json.JSONDecodeError:
            out.append({"error": "unreadable tool result"})
    return list(reversed(out))


def _ligand_args(d: QuestionDetails, k: int = 0) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if len(d.ligands) > k:
        args["ligand"] = d.ligands[k]
    return args


def first_call(task: str, d: QuestionDetails, n_images: int) -> tuple[str, dict[str, Any]]:
    """The program's (only) call for ``task``: tool name and arguments, from the question's details."""
    if task == T.RESIDUE_LIGAND:
        require(d, task, residue=True)
        args = {"pdb_id": d.pdb_id, "residue": d.residue.label(), "chain": d.residue.chain, **_ligand_args(d)}
        if d.ligand_atoms:
            args["ligand_atoms"] = list(d.ligand_atoms)
        return RESIDUE_HBONDS, args
    if task == T.POCKET_LIGAND:
        require(d, task)
        args = {"pdb_id": d.pdb_id, **_ligand_args(d)}
        if d.ligand_atoms:
            args["ligand_atoms"] = list(d.ligand_atoms)
        return POCKET_HBONDS, args
    contract = SPATIAL_CONTRACTS.get(task)
    if contract is None:
        raise PlannerError(f"router: no program for task {task!r}")
    args = {"pdb_id": d.pdb_id, **_ligand_args(d), "images": list(range(1, n_images + 1))}
    if task == T.TRANSLATION_ROTATION:
        require(d, task)
        if len(d.pdb_ids) < 2:
            raise PlannerError("router: the translation_rotation question does not state the target's PDB ID")
        args["target_pdb_id"] = d.pdb_ids[1]
        if len(d.ligands) > 1:
            args["target_ligand"] = d.ligands[1]
    elif task == T.INTERACTION_LOCATION:
        require(d, task, bond=True, options=True)
        b = d.bond
        args["bond"] = {"chain": b.residue.chain, "residue_name": b.residue.name,
                        "residue_number": f"{b.residue.number}{b.residue.ins_code}",
                        "residue_atom": b.residue_atom, "ligand_atom": b.ligand_atom}
        args["options"] = dict(d.options)
    else:
        require(d, task)
    return contract.name, args


class RouterPlanner(Planner):
    """Deterministic programs of tool calls; the answer is the tool's ``answer``."""

    kind = "router"

    def describe(self) -> dict[str, Any]:
        return {"planner": self.kind, "model": None}

    def step(self, inp: PlannerInput) -> PlannerReply:
        if inp.task not in T.TASKS:
            raise PlannerError(f"router: unknown task {inp.task!r}")
        n_assistant_calls = sum(1 for m in inp.messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if n_assistant_calls == 0:
            n_images = len(image_paths(inp.messages))
            expected = T.task_info(inp.task).n_images
            if n_images != expected:
                raise PlannerError(f"router: a {inp.task} question has {expected} images, this one {n_images}")
            name, args = first_call(inp.task, read_details(user_text(inp.messages)), n_images)
            require_tool(_tool_names(inp), name, inp.task)
            call = ToolCall("call_0", name, args, None, json.dumps({"name": name, "arguments": args}))
            return PlannerReply(text="", tool_calls=(call,), raw=call.raw, info={"program": inp.task})
        results = _last_results(inp.messages)
        if not results:
            raise PlannerError("router: expected a tool result after its call")
        res = results[-1]
        if "error" in res:
            raise PlannerError(f"router: tool failed: {res['error']}")
        answer = (res.get("result") or {}).get("answer") if isinstance(res.get("result"), dict) else None
        if not isinstance(answer, str) or not answer.strip():
            raise PlannerError("router: the tool's result has no 'answer'")
        return PlannerReply(text=answer, raw=answer, info={"program": inp.task})
