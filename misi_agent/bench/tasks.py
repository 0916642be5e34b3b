"""The nine MiSI-Bench tasks: stable ids, formats, image order, value grids, scored columns.

This module is the single place that states what each task is (facts from the paper,
Li, Kong et al., arXiv 2512.10867; see ../shared/docs/misi-bench.md) and every decision
this project makes where the paper is silent. Those decisions are collected in
:data:`OURS` (name -> one paragraph); code that implements one of them names its key in
a comment, e.g. ``# OURS["exact_tolerance"]``.

Task ids are stable strings used in question files, prompts, reports and the generator:
``translation``, ``rotation``, ``zooming``, ``residue_ligand_interaction``,
``translation_rotation``, ``rotation_rotation``, ``docking``, ``interaction_location``,
``pocket_ligand_interaction``. The residue–ligand task is scored in two columns
(``residue_ligand_pos`` / ``residue_ligand_neg``), so there are ten scored columns.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from misi_agent.errors import MisiError

# ----------------------------------------------------------------------------- ids

TRANSLATION = "translation"
ROTATION = "rotation"
ZOOMING = "zooming"
RESIDUE_LIGAND = "residue_ligand_interaction"
TRANSLATION_ROTATION = "translation_rotation"
ROTATION_ROTATION = "rotation_rotation"
DOCKING = "docking"
INTERACTION_LOCATION = "interaction_location"
POCKET_LIGAND = "pocket_ligand_interaction"

TASK_IDS: tuple[str, ...] = (
    TRANSLATION,
    ROTATION,
    ZOOMING,
    RESIDUE_LIGAND,
    TRANSLATION_ROTATION,
    ROTATION_ROTATION,
    DOCKING,
    INTERACTION_LOCATION,
    POCKET_LIGAND,
)

# The ten scored columns, in the paper's table order (Table 1).
COL_RESLIG_POS = "residue_ligand_pos"
COL_RESLIG_NEG = "residue_ligand_neg"
COLUMNS: tuple[str, ...] = (
    TRANSLATION,
    ROTATION,
    ZOOMING,
    COL_RESLIG_POS,
    COL_RESLIG_NEG,
    TRANSLATION_ROTATION,
    ROTATION_ROTATION,
    DOCKING,
    INTERACTION_LOCATION,
    POCKET_LIGAND,
)
COLUMN_LABELS: dict[str, str] = {
    TRANSLATION: "Trans",
    ROTATION: "Rot",
    ZOOMING: "Zoom",
    COL_RESLIG_POS: "ResLig Pos",
    COL_RESLIG_NEG: "ResLig Neg",
    TRANSLATION_ROTATION: "TransRot",
    ROTATION_ROTATION: "RotRot",
    DOCKING: "Docking",
    INTERACTION_LOCATION: "InterLoc",
    POCKET_LIGAND: "PocLig",
}
# The paper's "Avg" leaves out the two multi-step multiple-choice tasks (T5, T6).
PAPER_AVG_COLUMNS: tuple[str, ...] = tuple(c for c in COLUMNS if c not in (TRANSLATION_ROTATION, ROTATION_ROTATION))

CLOZE = "cloze"
MC = "mc"
CHOICE_LETTERS: tuple[str, ...] = ("A", "B", "C", "D")

VIEWS3 = ("front", "left", "top")
VIEWS6 = ("front", "left", "top", "back", "right", "bottom")


# ----------------------------------------------------------------------------- value grids


@dataclass(frozen=True)
class ValueGrid:
    """The values a command magnitude takes: multiples of ``step`` in [low, high] with |v| >= min_abs."""

    axes: tuple[str, ...]
    low: float
    high: float
    step: float
    min_abs: float = 0.0

    def values(self) -> tuple[float, ...]:
        """Every allowed value, ascending."""
        k0 = math.ceil(self.low / self.step - 1e-9)
        k1 = math.floor(self.high / self.step + 1e-9)
        vals = (k * self.step for k in range(k0, k1 + 1))
        return tuple(float(v) for v in vals if abs(v) >= self.min_abs - 1e-9)

    def contains(self, value: float) -> bool:
        """True when ``value`` lies on the grid (within 1e-6)."""
        return any(abs(value - v) < 1e-6 for v in self.values())


# T1: axis x or y, d uniform in [-4, 4] Å binned to 1 Å; OURS["nonzero_magnitudes"].
TRANSLATION_GRID = ValueGrid(("x", "y"), -4.0, 4.0, 1.0, min_abs=1.0)
# T2: axis x, y or z, angle uniform in [-90, 90]° binned to 15°; OURS["nonzero_magnitudes"].
ROTATION_GRID = ValueGrid(("x", "y", "z"), -90.0, 90.0, 15.0, min_abs=15.0)
# T3: depth 40-60 Å in 1 Å bins; OURS["zoom_sign"].
ZOOM_GRID = ValueGrid(("z",), 40.0, 60.0, 1.0, min_abs=40.0)
# T7: the roll part uses T2's grid (OURS["docking_roll_grid"]); the move is along x, OURS["docking_shift"].
DOCKING_ROLL_GRID = ROTATION_GRID
DOCKING_SHIFT_GRID = ValueGrid(("x",), -30.0, 30.0, 1.0, min_abs=10.0)
# T5: f1 uses T1's grid, f2 T2's (OURS["multistep_grids"]); T6: two rolls on T2's grid about different axes.
TRANSROT_F1_GRID = TRANSLATION_GRID
TRANSROT_F2_GRID = ROTATION_GRID
ROTROT_GRID = ROTATION_GRID
# T8: whole-Å moves along x and y (the answer brings the bond centre onto the line of sight).
INTERLOC_STEP = 1.0

# Scoring spans for the normalised magnitude error, OURS["magnitude_score"].
SPAN_TRANSLATION = 8.0  # Å
SPAN_ROTATION = 180.0  # degrees


# ----------------------------------------------------------------------------- task table


@dataclass(frozen=True)
class TaskInfo:
    """What one task is: format, image order, answer form and how it is scored.

    ``images`` names every input image in order (the prompt describes them in this order
    and a question must carry exactly this many). ``metric`` selects the scoring rule in
    :mod:`misi_agent.bench.scoring`.
    """

    id: str
    number: int  # T1..T9 in the paper
    title: str
    format: str  # CLOZE | MC
    metric: str  # "translation" | "rotation" | "accuracy_zoom" | "interactions_residue" | "choice" | "docking" | "interactions_pocket"
    images: tuple[str, ...]
    answer_example: str
    columns: tuple[str, ...]
    paper_share: float  # share of the paper's whole data set, %
    paper_per_complex: int | None  # samples per test complex in the paper, where given

    @property
    def n_images(self) -> int:
        return len(self.images)


def _views(prefix: str, views: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"{prefix}{v}" for v in views)


_UNIT_IMAGES = _views("initial ", VIEWS3) + ("front after the operation",)

TASKS: dict[str, TaskInfo] = {
    t.id: t
    for t in (
        TaskInfo(TRANSLATION, 1, "Translation", CLOZE, "translation", _UNIT_IMAGES, "move x 3", (TRANSLATION,), 9.30, 2),
        TaskInfo(ROTATION, 2, "Rotation", CLOZE, "rotation", _UNIT_IMAGES, "roll y 15", (ROTATION,), 13.95, 3),
        TaskInfo(ZOOMING, 3, "Zooming", CLOZE, "accuracy_zoom", _UNIT_IMAGES, "move z 50", (ZOOMING,), 9.30, 2),
        TaskInfo(
            RESIDUE_LIGAND, 4, "Residue-ligand interaction", CLOZE, "interactions_residue",
            _views("residue + ligand ", VIEWS6), "Yes: ARG NH2, O1B; ARG NE, O2G",
            (COL_RESLIG_POS, COL_RESLIG_NEG), 15.73, None,
        ),
        TaskInfo(
            TRANSLATION_ROTATION, 5, "Translation + rotation", MC, "choice",
            _views("reference ", VIEWS3) + ("reference front after f2(f1)",) + _views("target ", VIEWS3)
            + tuple(f"option {c}" for c in CHOICE_LETTERS),
            "C", (TRANSLATION_ROTATION,), 13.95, 3,
        ),
        TaskInfo(
            ROTATION_ROTATION, 6, "Rotation + rotation", MC, "choice",
            _views("reference ", VIEWS3) + ("reference front after the two rotations",)
            + tuple(f"option {c}" for c in CHOICE_LETTERS),
            "B", (ROTATION_ROTATION,), 13.95, 3,
        ),
        TaskInfo(
            DOCKING, 7, "Ligand docking", CLOZE, "docking",
            _views("pocket alone ", VIEWS3) + _views("displaced ligand alone ", VIEWS3) + ("pocket and displaced ligand front",),
            "roll x 75, move x -14", (DOCKING,), 13.95, 3,
        ),
        TaskInfo(
            INTERACTION_LOCATION, 8, "Interaction location", MC, "choice",
            _views("complex ", VIEWS6), "A", (INTERACTION_LOCATION,), 7.52, None,
        ),
        TaskInfo(
            POCKET_LIGAND, 9, "Pocket-ligand interaction", CLOZE, "interactions_pocket",
            _views("complex ", VIEWS6), "ARG 45 NH2 A, O1B; LYS 47 NZ A, O1A", (POCKET_LIGAND,), 2.33, None,
        ),
    )
}

# The fine-tuned model's exact match on T4 positives by number of true H-bonds (paper).
PAPER_T4_EXACT_BY_NBONDS = {1: 64.72, 2: 28.70, 3: 20.51}
PAPER_T4_TEST_COUNTS = {"pos": 1499, "neg": 1603}
TINY_ITEMS_PER_TASK = 50  # "MiSI-Bench(tiny)": 50 random items per task


def task_info(task: str) -> TaskInfo:
    """The :class:`TaskInfo` of a task id; a clear error for anything else."""
    try:
        return TASKS[task]
    except (KeyError, TypeError):
        raise MisiError(f"unknown task {task!r} (expected one of {', '.join(TASK_IDS)})") from None


# ----------------------------------------------------------------------------- our decisions

OURS: dict[str, str] = {
    # --- scene and camera (implemented in misi_agent/camera.py, stated in docs/conventions.md)
    "camera": "Perspective camera with a 30° horizontal field of view (ChimeraX's default). The initial view "
    "fits the bounding sphere of the displayed atoms; the centre of rotation is the centroid of the displayed "
    "atoms and moves with them.",
    "views": "The other five views are the front view rolled about the centroid: left = roll y 90, top = roll x 90, "
    "back = roll y 180, right = roll y -90, bottom = roll x -90 (each view shows the side it is named after).",
    # --- value grids (this module)
    "nonzero_magnitudes": "T1 distances and T2 angles are drawn from the bins of the paper's range without 0 "
    "(a zero move or roll would leave the after-image identical): d in {±1..±4} Å, angle in {±15..±90}°.",
    "zoom_sign": "T3 moves are toward the viewer (positive z, the scene grows), 40-60 Å in whole Å: the paper's "
    "reasons for the range (too small to see below 40, collapse onto one atom above 60) only make sense for "
    "approaching the camera.",
    "docking_roll_grid": "T7 rolls use T2's grid (multiples of 15° in [-90, 90], not 0), about x, y or z.",
    "docking_shift": "T7's displacement along x is a whole number of Å with 10 <= |d| <= 30, sign random; the "
    "generator picks it so that the displaced ligand clears the pocket in the front view.",
    "multistep_grids": "T5's f1 is a T1 move (x or y, ±1..±4 Å) and f2 a T2 roll; T6's two rolls are on T2's grid "
    "about two different axes.",
    # --- generation (implemented in the modules named; their docstrings give the details)
    "pocket_cutoff": "The pocket is every whole amino-acid residue with a heavy atom within 10 Å of a ligand heavy "
    "atom (structure.POCKET_CUTOFF), after PDBbind's pockets.",
    "split": "A PoseBusters entry is train or test by a hash of its PDB ID (80 % train); the PLIP pool is held out "
    "(bench/splits.py).",
    "decoy_magnitude": "A T5/T6 decoy that changes a magnitude keeps the sign and takes another bin of the same "
    "grid (bench/items.py).",
    "option_visibility": "The four options of T5/T6 differ pairwise by a minimum mean projected-atom distance "
    "(items.MIN_OPTION_PX at 512 px), else the decoys are drawn again (bench/items.py).",
    "answer_letter": "The letter of the correct option is drawn uniformly from A-D with the item's rng "
    "(bench/items.py).",
    "zoom_depth_limit": "A zoom never brings the scene centroid closer than task_geometry.MIN_ZOOM_DEPTH to the "
    "camera: the 40-60 Å range shrinks for close scenes (bench/task_geometry.py).",
    "rotrot_decoy_axis": "T6 decoy (3) moves the first rotation to the third axis, so every option turns about "
    "two different axes (bench/task_geometry.py).",
    "docking_camera": "All seven T7 images share the camera that frames pocket and displaced ligand together "
    "(bench/task_geometry.py).",
    "t4_balance": "T4 items alternate positive / negative; negatives are residues in contact with the ligand but "
    "without an H-bond, where there are any (bench/task_hbonds.py).",
    "t8_answer": "T8's answer rounds -cx, -cy of the bond centroid in the front view to whole Å; decoys flip signs "
    "or change magnitudes by 2-4 Å (bench/task_hbonds.py).",
    "bond_order": "Gold H-bond lists are written in a fixed order (T4: residue atom order then ligand; T9: chain, "
    "number, insertion code, atoms); scoring ignores the order (bench/task_hbonds.py).",
    "prompt_value_grid": "Prompts state the value grid of the answer (e.g. whole Å from -4 to 4) as part of the "
    "exact output format.",
    "prompt_no_ligand_code": "Prompts name the PDB entry but not the ligand's CCD code: the pictures show one ligand, "
    "and a test taker (or agent) must find which of the entry's ligands it is from the pictures (its atom labels, "
    "shape and place). Ligand atom names are stated only where a task needs them (T8's named bond).",
    # --- scoring (misi_agent/bench/scoring.py)
    "magnitude_score": "T1/T2 composite: 0 unless the axis is right, else max(0, 1 - |d_pred - d| / span) with "
    "span 8 Å (translation) and 180° (rotation); a one-bin miss costs 0.125 and 0.083.",
    "docking_move_score": "T7 move part: 0.5 * max(0, 1 - |d_pred - d| / |d|) when the predicted net move is "
    "along x only and has the right sign, else 0. The roll part is 0.5 * the T2 score.",
    "list_share": "T4 positives and T9: share = |P ∩ G| / max(|P|, |G|); then a superset of the truth with extra "
    "bonds scores 0.5 and more than twice as many bonds as the truth scores 0 (both are the paper's rules).",
    "empty_truth": "A T9 item whose truth has no H-bond scores 1 for an empty answer ('None'), else 0; the "
    "generator does not emit such items.",
    "exact_tolerance": "Exact match for magnitudes: |d_pred - d| < half a bin (0.5 Å, 7.5°), i.e. the prediction "
    "rounds to the true bin. Docking is exact when both parts are; lists when P = G; choices when the letter is "
    "right.",
    "angle_wrap": "Predicted angles are compared modulo 360° (roll y 270 = roll y -90).",
    "net_motion": "A cloze prediction is reduced to its net motion: several moves add up per axis, several rolls "
    "about the same axis add up. A T1/T3 answer with a non-zero roll, a T2 answer with a non-zero move, or a "
    "net motion along more than one axis has no single axis and scores 0. In T7 rolls turn about the "
    "ligand's own centroid and so commute with moves: the order of the two parts does not matter.",
    "residue_bond_key": "T4 bonds are compared as (residue name, residue atom, ligand atom); a residue number or "
    "chain written in a T4 answer is ignored.",
    "pocket_bond_key": "T9 bonds are compared as (residue name, number with insertion code, residue atom, chain, "
    "ligand atom). A predicted bond without a chain matches a true bond on any chain (each true bond at most "
    "once); a predicted bond without a residue number never matches.",
    "bond_dedup": "Repeated bonds in a prediction count once; a bond written ligand atom first is turned around.",
    "t4_column": "A T4 item is a positive (residue_ligand_pos) when its gold answer starts with Yes, a negative "
    "otherwise.",
    "choice_parsing": "A multiple-choice answer is the letter after the last 'Answer:' / 'answer is' (or in "
    "<answer> tags, or a lone letter). Without such a marker, the distinct letters written as '(C)', 'option "
    "C', 'C)' or a standalone capital must agree, else the answer is unparsed. For T8 a command answer is "
    "matched to the option with the same net motion.",
    "unparsed": "A prediction that cannot be parsed scores 0 (both metrics) and is counted as unparsed.",
    "averages": "Averages are unweighted means of the column means (the paper's Avg reproduces this from its "
    "columns), over the columns that hold items; the report says which columns were empty.",
    "predictions_file": "Predictions are JSONL objects {id, prediction}. A malformed line, a non-string prediction "
    "or a duplicated id is an error (the run is broken or ambiguous). Ids not in the gold set are ignored with a "
    "warning and counted; if none of the ids is in the gold set, that is an error. A gold id without a "
    "prediction (or with prediction null) scores 0 and is counted as missing.",
}


def ours(key: str) -> str:
    """The text of one of this project's decisions (KeyError names the missing key)."""
    return OURS[key]
