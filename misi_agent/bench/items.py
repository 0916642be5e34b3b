"""What one benchmark item is before it is drawn, and the sampling rules every task shares.

A task generator (:mod:`misi_agent.bench.task_geometry`, :mod:`misi_agent.bench.task_hbonds`)
is a pure function ``(complex(es), rng) -> ItemSpec``: the scenes to render in prompt order,
the answer derived from those scenes, the parameters that produced them (kept in the item's
``meta`` for the independent answer-key check) and the values the prompt template needs.
:mod:`misi_agent.bench.generate` renders the scenes and writes the files.

Shared rules (MiSI-Bench values, binned as the paper says; **(ours)** marked):

* translation: axis ``x`` or ``y``, d uniform in [−4, 4] Å rounded to whole Å, never 0;
* rotation: axis ``x``, ``y`` or ``z``, angle uniform in [−90°, 90°] rounded to 15°, never 0;
* zoom: ``move z d`` with d uniform in [40, 60] Å rounded to whole Å;
* **(ours)** a decoy that "changes the magnitude" keeps the sign and takes another bin;
* **(ours)** options of a multiple-choice item are visibly different: for every pair of
  options the mean distance between the projected positions of the same atoms (atoms in
  front of the camera and inside a 512 px image in both) is at least
  :data:`MIN_OPTION_PX` pixels at 512 px; otherwise the decoys are drawn again;
* **(ours)** the letter of the correct option is drawn uniformly from A–D with the item's rng.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from misi_agent.bench import tasks as T
from misi_agent.bench.tasks import ValueGrid
from misi_agent.camera import Camera, Command
from misi_agent.scene import Scene

LETTERS = T.CHOICE_LETTERS
TRANSLATION_AXES = T.TRANSLATION_GRID.axes
ROTATION_AXES = T.ROTATION_GRID.axes
ZOOM_RANGE = (int(T.ZOOM_GRID.low), int(T.ZOOM_GRID.high))  # Å, move z
MIN_OPTION_PX = 8.0  # mean projected-atom distance between any two options at CHECK_SIZE
CHECK_SIZE = 512  # image size at which visual differences are measured
MAX_TRIES = 50  # resampling attempts before a complex is given up for an item


class NotApplicable(Exception):
    """This complex cannot give an item of this kind (e.g. no H-bond); the caller tries the next one."""


@dataclass(frozen=True)
class ImageSpec:
    """One image of an item in prompt order: file stem, the scene to draw and what it shows."""

    name: str
    scene: Scene
    caption: str


@dataclass
class ItemSpec:
    """An item before rendering.

    ``images`` are drawn in order; ``references`` are scenes that are not drawn but whose atom
    positions the answer-key check needs (e.g. the docked ligand of the docking task).
    ``options`` maps letters to the text shown for text options (interaction location) or to
    the image name for image options; ``answer`` is the exact expected output.
    """

    task: str
    pdb_id: str
    ligand_code: str
    images: list[ImageSpec]
    answer: str
    params: dict[str, Any]
    prompt_params: dict[str, Any]
    options: dict[str, str] | None = None
    references: dict[str, Scene] = field(default_factory=dict)
    extra_pdb_ids: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- sampling


def sample_on_grid(rng: np.random.Generator, grid: ValueGrid, high: float | None = None) -> float:
    """A value uniform in [grid.low, ``high`` or grid.high], rounded to the grid's step, |v| >= min_abs."""
    hi = grid.high if high is None else high
    while True:
        v = round(rng.uniform(grid.low, hi) / grid.step) * grid.step
        if abs(v) >= grid.min_abs - 1e-9 and grid.low - 1e-9 <= v <= hi + 1e-9:
            return float(v)


def sample_translation(rng: np.random.Generator, axes: tuple[str, ...] = TRANSLATION_AXES) -> Command:
    """``move a d``: a in ``axes``, d uniform in [−4, 4] Å binned to 1 Å, nonzero (tasks.TRANSLATION_GRID)."""
    axis = str(rng.choice(axes))
    return Command("move", axis, sample_on_grid(rng, T.TRANSLATION_GRID))


def sample_angle(rng: np.random.Generator) -> float:
    """An angle uniform in [−90°, 90°] binned to 15°, nonzero (tasks.ROTATION_GRID)."""
    return sample_on_grid(rng, T.ROTATION_GRID)


def sample_rotation(rng: np.random.Generator, axes: tuple[str, ...] = ROTATION_AXES) -> Command:
    """``roll a θ``: a in ``axes``, θ from :func:`sample_angle`."""
    return Command("roll", str(rng.choice(axes)), sample_angle(rng))


def sample_zoom(rng: np.random.Generator, high: int = ZOOM_RANGE[1]) -> Command:
    """``move z d`` with d uniform in [40, ``high``] Å, binned to 1 Å (tasks.ZOOM_GRID)."""
    return Command("move", "z", sample_on_grid(rng, T.ZOOM_GRID, high=float(high)))


def other_magnitude(cmd: Command, rng: np.random.Generator) -> Command:
    """The same command with another magnitude bin of the same sign (OURS: decoy magnitudes)."""
    grid = T.TRANSLATION_GRID if cmd.op == "move" else T.ROTATION_GRID
    bins = sorted({abs(v) for v in grid.values() if v != 0 and abs(abs(v) - abs(cmd.value)) > 1e-6})
    mag = float(rng.choice(bins))
    return Command(cmd.op, cmd.axis, float(np.sign(cmd.value)) * mag)


def flipped(cmd: Command) -> Command:
    return Command(cmd.op, cmd.axis, -cmd.value)


def other_axis(cmd: Command, rng: np.random.Generator, avoid: tuple[str, ...] = ()) -> Command:
    """The same command about/along another axis (of the same family), avoiding ``avoid`` when possible."""
    family = TRANSLATION_AXES if cmd.op == "move" else ROTATION_AXES
    axes = [a for a in family if a != cmd.axis and a not in avoid] or [a for a in family if a != cmd.axis]
    return Command(cmd.op, str(rng.choice(axes)), cmd.value)


def decoy_pairs(f1: Command, f2: Command, rng: np.random.Generator, avoid_axis_of_f2: bool = False) -> list[tuple[Command, Command]]:
    """The three decoys of a two-step operation (MiSI-Bench, T5/T6).

    (1) change the magnitude of both; (2) flip the sign of f1 and change the magnitude of f2;
    (3) change the axis of f1 and change the magnitude of f2.
    """
    avoid = (f2.axis,) if avoid_axis_of_f2 else ()
    return [
        (other_magnitude(f1, rng), other_magnitude(f2, rng)),
        (flipped(f1), other_magnitude(f2, rng)),
        (other_axis(f1, rng, avoid), other_magnitude(f2, rng)),
    ]


DECOY_SCHEMES = ("magnitude_both", "flip_f1_magnitude_f2", "axis_f1_magnitude_f2")


def place_options(truth: Any, decoys: list[Any], rng: np.random.Generator) -> tuple[list[Any], str, list[int]]:
    """Shuffle the truth among the decoys; returns (options in letter order, answer letter, source index).

    ``source[k]`` is 0 for the truth and 1 + j for decoy j.
    """
    order = [int(i) for i in rng.permutation(len(decoys) + 1)]
    items = [truth] + list(decoys)
    options = [items[i] for i in order]
    return options, LETTERS[order.index(0)], order


# ----------------------------------------------------------------------------- visibility


def projected(coords: np.ndarray, size: int = CHECK_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """Screen positions and a mask of atoms in front of the camera and inside the image."""
    cam = Camera(size, size)
    screen, _ = cam.project(coords)
    ok = cam.visible(coords) & np.all(np.isfinite(screen), axis=1)
    ok &= (screen[:, 0] >= 0) & (screen[:, 0] < size) & (screen[:, 1] >= 0) & (screen[:, 1] < size)
    return screen, ok


def mean_pixel_difference(a: np.ndarray, b: np.ndarray, size: int = CHECK_SIZE) -> float:
    """Mean distance in pixels between the projections of the same atoms in two states.

    Atoms shown in only one of the two count as fully different (the image size); if no atom
    is shown in either, the states are called identical (0).
    """
    sa, va = projected(a, size)
    sb, vb = projected(b, size)
    both = va & vb
    either = va | vb
    if not either.any():
        return 0.0
    d = np.where(both, np.linalg.norm(np.nan_to_num(sa - sb), axis=1), float(size))
    return float(d[either].mean())


def all_distinct(states: list[np.ndarray], min_px: float = MIN_OPTION_PX, size: int = CHECK_SIZE) -> bool:
    """True when every pair of states differs by at least ``min_px`` mean projected pixels."""
    for i in range(len(states)):
        for j in range(i + 1, len(states)):
            if mean_pixel_difference(states[i], states[j], size) < min_px:
                return False
    return True


def shown_fraction(coords: np.ndarray, size: int = CHECK_SIZE) -> float:
    """Fraction of atoms that land inside the image in front of the camera."""
    return float(projected(coords, size)[1].mean()) if len(coords) else 0.0
