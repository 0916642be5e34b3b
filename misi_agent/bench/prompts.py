"""One fixed prompt template per task, in this project's own words.

Each template carries what the paper's prompts carry: the image order and what each image
shows, the colour and label rules, the coordinate system and camera, the command rules,
the exact output format with examples, and the item's PDB ID, residue, chain and atom
names. The ligand's code is not stated (OURS["prompt_no_ligand_code"]): as in the pictures, the
ligand is the one shown, and an agent has to find it there. The value grid of the answer is stated too (OURS["prompt_value_grid"]).

A generator calls :func:`build_prompt` with exactly the parameters listed in
:data:`PROMPT_PARAMS` for the task (missing or unknown parameters are an error, so that no
answer-bearing value slips into a prompt; ``options=None`` is accepted for tasks without
text options):

===============================  ==========================================================
task                             parameters
===============================  ==========================================================
every task                       ``pdb_id`` (e.g. ``6YQW``)
residue_ligand_interaction       + ``residue_name`` (``ARG``), ``residue_number`` (``45`` or ``45A``), ``chain``
translation_rotation             + ``target_pdb_id`` (the second complex)
interaction_location             + ``chain``, ``residue_name``, ``residue_number``, ``residue_atom`` (``NZ``),
                                   ``ligand_atom`` (``O1A``), ``options`` (four command strings, A-D)
===============================  ==========================================================
"""
from __future__ import annotations

from typing import Any

from misi_agent.bench import tasks as T
from misi_agent.errors import MisiError


class PromptError(MisiError):
    """Wrong parameters for a prompt template (one-line message)."""


_COMMON = ("pdb_id",)  # the ligand code is never stated: the agent finds the ligand in the pictures
PROMPT_PARAMS: dict[str, tuple[str, ...]] = {
    T.TRANSLATION: _COMMON,
    T.ROTATION: _COMMON,
    T.ZOOMING: _COMMON,
    T.RESIDUE_LIGAND: _COMMON + ("residue_name", "residue_number", "chain"),
    T.TRANSLATION_ROTATION: _COMMON + ("target_pdb_id",),
    T.ROTATION_ROTATION: _COMMON,
    T.DOCKING: _COMMON,
    T.INTERACTION_LOCATION: _COMMON + ("chain", "residue_name", "residue_number", "residue_atom", "ligand_atom",
                                       "options"),
    T.POCKET_LIGAND: _COMMON,
}

# ----------------------------------------------------------------------------- shared blocks

STYLE = (
    "How the pictures are drawn: black background; solvent removed and hydrogens hidden. Oxygen atoms are red and "
    "nitrogen atoms blue. Ligand carbons are grey. Pocket residues are shown whole, and their carbons alternate "
    "between purple and orange from one residue to the next, so neighbouring residues differ in colour. Each pocket "
    "residue carries a label with its name and number (for example ARG 45); each ligand atom carries a label with "
    "its atom name (for example O1B)."
)

AXES = (
    "Screen axes: x points to the right, y points up, z points out of the screen toward you. The camera is a "
    "perspective camera (30-degree field of view) at a fixed place, so anything brought closer along +z looks "
    "larger. The front view shows the complex as it is; the other views are the front view turned about the "
    "centre of the displayed atoms: left = roll y 90 (you see the scene's left side), top = roll x 90 (you look "
    "down on it; its front side is at the bottom of the picture), back = roll y 180, right = roll y -90, "
    "bottom = roll x -90."
)

COMMANDS = (
    "Command language: 'move <axis> <d>' shifts the scene by d angstroms along a screen axis (x: to the right is "
    "positive; y: up is positive; z: toward you is positive, and the scene grows). 'roll <axis> <angle>' turns the "
    "scene by angle degrees about a screen axis that passes through the centre of the displayed atoms, by the "
    "right-hand rule (thumb along the positive axis; a positive angle turns counter-clockwise when the axis points "
    "at you). The centre moves with the atoms. Several commands are separated by ', ' and carried out from left to "
    "right."
)


def _grid_text(grid: T.ValueGrid, unit: str) -> str:
    low, high = int(grid.low), int(grid.high)
    step = int(grid.step)
    zero = " (never 0)" if grid.min_abs > 0 and grid.low < 0 else ""
    if step == 1:
        return f"a whole number of {unit} from {low} to {high}{zero}"
    return f"a multiple of {step} {unit} from {low} to {high}{zero}"


def _images(lines: list[str]) -> str:
    return "Images, in order:\n" + "\n".join(f"  Image {i}: {text}" for i, text in enumerate(lines, start=1))


def _scene(pdb_id_key: str = "pdb_id") -> str:
    return (f"The pictures show the binding pocket of PDB entry {{{pdb_id_key}}} (the whole residues around the ligand) "
            f"together with the ligand.")


_UNIT_IMAGES = [
    "front view of the initial complex",
    "left view of the initial complex",
    "top view of the initial complex",
    "front view after one operation was applied to the whole scene",
]

_CMD_ONLY = "Reply with the command only, nothing else, in exactly this form: "

# ----------------------------------------------------------------------------- templates

TEMPLATES: dict[str, str] = {
    T.TRANSLATION: "\n\n".join([
        _scene(), STYLE, AXES, COMMANDS, _images(_UNIT_IMAGES),
        "Task: the whole scene was shifted once, along x or along y. Compare image 4 with image 1 and give the "
        f"shift. The distance is {_grid_text(T.TRANSLATION_GRID, 'angstroms')}.",
        _CMD_ONLY + "move <x|y> <d>. Examples: move x 3 / move y -2",
    ]),
    T.ROTATION: "\n\n".join([
        _scene(), STYLE, AXES, COMMANDS, _images(_UNIT_IMAGES),
        "Task: the whole scene was turned once about x, y or z through the centre of the displayed atoms. Compare "
        f"image 4 with images 1-3 and give the turn. The angle is {_grid_text(T.ROTATION_GRID, 'degrees')}.",
        _CMD_ONLY + "roll <x|y|z> <angle>. Examples: roll y 15 / roll x -60",
    ]),
    T.ZOOMING: "\n\n".join([
        _scene(), STYLE, AXES, COMMANDS, _images(_UNIT_IMAGES),
        "Task: the whole scene was brought toward the camera along z, so it looks larger in image 4. Judge from "
        "how much larger it looks how far it moved. The distance is "
        f"{_grid_text(T.ZOOM_GRID, 'angstroms')}.",
        _CMD_ONLY + "move z <d>. Example: move z 50",
    ]),
    T.RESIDUE_LIGAND: "\n\n".join([
        "The pictures show one residue, {residue_name} {residue_number} of chain {chain}, from the binding pocket of "
        "PDB entry {pdb_id}, together with the ligand; no other residue is shown.",
        STYLE, AXES,
        _images([f"{v} view of the residue and the ligand" for v in T.VIEWS6]),
        "Task: decide whether {residue_name} {residue_number} forms hydrogen bonds with the ligand, and if so "
        "list every one. Name each bond by the residue's atom first and the ligand atom second, whichever of the "
        "two is the donor; list each pair once.",
        "Reply in exactly one of these forms, nothing else:\n"
        "  No\n"
        "  Yes: <residue name> <residue atom>, <ligand atom>; <residue name> <residue atom>, <ligand atom>\n"
        "Examples: No / Yes: ARG NH2, O1B / Yes: ARG NH2, O1B; ARG NE, O2G",
    ]),
    T.TRANSLATION_ROTATION: "\n\n".join([
        "The pictures show two protein-ligand complexes: a reference complex (binding pocket of PDB entry {pdb_id} "
        "with its ligand) and a target complex (binding pocket of PDB entry {target_pdb_id} with its ligand).",
        STYLE, AXES, COMMANDS,
        _images([
            "front view of the reference complex",
            "left view of the reference complex",
            "top view of the reference complex",
            "front view of the reference complex after two operations: first a shift (move), then a turn (roll)",
            "front view of the target complex",
            "left view of the target complex",
            "top view of the target complex",
            "option A", "option B", "option C", "option D",
        ]),
        "Task: work out the shift and the turn that take image 1 to image 4. Apply the same shift and then the same "
        "turn to the target complex as shown in image 5. Which option (images 8-11) shows the result?",
        "Reply with one letter only: A, B, C or D. Example: C",
    ]),
    T.ROTATION_ROTATION: "\n\n".join([
        _scene(), STYLE, AXES, COMMANDS,
        _images([
            "front view of the initial complex",
            "left view of the initial complex",
            "top view of the initial complex",
            "front view after two turns (roll) about two different axes, one after the other",
            "option A", "option B", "option C", "option D",
        ]),
        "Task: work out the two turns that take image 1 to image 4. Apply the same two turns, in the same order, "
        "once more to the scene as it is in image 4. Which option (images 5-8) shows the result?",
        "Reply with one letter only: A, B, C or D. Example: B",
    ]),
    T.DOCKING: "\n\n".join([
        _scene(), STYLE, AXES, COMMANDS,
        _images([
            "front view of the pocket alone",
            "left view of the pocket alone",
            "top view of the pocket alone",
            "front view of the displaced ligand alone (same camera)",
            "left view of the displaced ligand alone (same camera)",
            "top view of the displaced ligand alone (same camera)",
            "front view of the pocket and the displaced ligand together",
        ]),
        "Task: the ligand was taken out of its pocket: first it was shifted along x away from the pocket, then "
        "turned about its own centre. Give the commands that put it back in its bound pose. These commands move "
        "only the ligand, and a roll turns the ligand about the ligand's own centre. Give the turn first and the "
        "shift second. The angle is "
        f"{_grid_text(T.DOCKING_ROLL_GRID, 'degrees')}; the shift is along x, a whole number of angstroms.",
        _CMD_ONLY + "roll <x|y|z> <angle>, move x <d>. Examples: roll x 75, move x -14 / roll z -30, move x 12",
    ]),
    T.INTERACTION_LOCATION: "\n\n".join([
        _scene(), STYLE, AXES, COMMANDS,
        _images([f"{v} view of the complex" for v in T.VIEWS6]),
        "Task: in this complex, chain {chain}, {residue_name} {residue_number} {residue_atom} forms a hydrogen bond "
        "with the ligand atom {ligand_atom}. Which shift of the whole scene puts the midpoint of these two atoms on "
        "the line of sight through the centre of the front view (image 1)? Shifts are in whole angstroms.\n"
        "A. {option_a}\nB. {option_b}\nC. {option_c}\nD. {option_d}",
        "Reply with one letter only: A, B, C or D. Example: A",
    ]),
    T.POCKET_LIGAND: "\n\n".join([
        _scene(), STYLE, AXES,
        _images([f"{v} view of the complex" for v in T.VIEWS6]),
        "Task: list every hydrogen bond between the pocket and the ligand. Name each bond by the residue "
        "atom first and the ligand atom second, whichever of the two is the donor; list each pair once. A residue "
        "atom is written as residue name, residue number, atom name and chain.",
        "Reply with the list only, bonds separated by '; ', in exactly this form:\n"
        "  <residue name> <residue number> <residue atom> <chain>, <ligand atom>; ...\n"
        "Example: ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A",
    ]),
}


def build_prompt(task: str, **params: Any) -> str:
    """The filled-in prompt of ``task``; exactly the parameters of :data:`PROMPT_PARAMS` are required."""
    info = T.task_info(task)
    want = PROMPT_PARAMS[info.id]
    if "options" not in want and params.get("options", "") is None:
        params.pop("options")  # callers may pass options=None for tasks without text options
    missing = [k for k in want if k not in params]
    extra = sorted(k for k in params if k not in want)
    if missing:
        raise PromptError(f"prompt for {task}: missing parameter(s) {', '.join(missing)}")
    if extra:
        raise PromptError(f"prompt for {task}: unknown parameter(s) {', '.join(extra)} "
                          f"(expected {', '.join(want)})")
    values: dict[str, str] = {}
    for k in want:
        v = params[k]
        if k == "options":
            if not isinstance(v, (list, tuple)) or len(v) != len(T.CHOICE_LETTERS) \
                    or not all(isinstance(o, str) and o.strip() for o in v):
                raise PromptError(f"prompt for {task}: 'options' must be {len(T.CHOICE_LETTERS)} non-empty strings")
            for letter, opt in zip(T.CHOICE_LETTERS, v):
                values[f"option_{letter.lower()}"] = opt.strip()
            continue
        if v is None or not str(v).strip() or "{" in str(v) or "}" in str(v):
            raise PromptError(f"prompt for {task}: parameter {k!r} must be a non-empty value without braces")
        values[k] = str(v).strip()
    return TEMPLATES[info.id].format(**values)
