"""Analysis by synthesis: score every candidate command against an image and rank them.

A candidate is a list of commands (``move x 3``; ``move y -2, roll z 45``). Its prediction is
the registered scene moved by the commands (:meth:`ScenePoints.moved`: rolls about the
centroid of the atoms, which moves with them) and projected through the registered camera;
its score is the symmetric truncated chamfer cost against the image
(:func:`misi_agent.tools.registration.match_cost`, px, lower is better).

Large answer spaces (the 576 move-roll pairs of translation + rotation, the 864 roll pairs
of rotation + rotation) are searched coarse to fine: every candidate is first scored on its
atoms only, forward direction only (cheap), then the best :data:`REFINE_TOP` are scored in
full. The answer spaces come from the benchmark's value grids
(:mod:`misi_agent.bench.tasks`): they are the task definition, not a renderer's setting.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from misi_agent.bench import tasks as T
from misi_agent.camera import Command, format_commands
from misi_agent.tools.atom_detection import ImageAnalysis
from misi_agent.tools.registration import ScenePoints, ViewCamera, backward_samples, match_cost
from misi_agent.tools.spatial_records import Candidate

REFINE_TOP = 24  # candidates re-scored in full after the coarse pass
COARSE_ATOMS = 80  # at most this many atoms (evenly spread over the scene's order) score the coarse pass
TOP_REPORTED = 5  # hypotheses listed in a result


def moves(grid: T.ValueGrid = T.TRANSLATION_GRID) -> list[Command]:
    """Every ``move a d`` of a grid (axes × values)."""
    return [Command("move", a, v) for a in grid.axes for v in grid.values()]


def rolls(grid: T.ValueGrid = T.ROTATION_GRID, axes: Sequence[str] | None = None) -> list[Command]:
    """Every ``roll a θ`` of a grid (axes × values)."""
    return [Command("roll", a, v) for a in (axes or grid.axes) for v in grid.values()]


def roll_pairs(grid: T.ValueGrid = T.ROTATION_GRID) -> list[tuple[Command, Command]]:
    """Two rolls about different axes, in order (rotation + rotation's answer space)."""
    return [(r1, r2) for r1 in rolls(grid) for r2 in rolls(grid) if r2.axis != r1.axis]


def move_roll_pairs() -> list[tuple[Command, Command]]:
    """A move then a roll (translation + rotation's answer space)."""
    return [(m, r) for m in moves(T.TRANSROT_F1_GRID) for r in rolls(T.TRANSROT_F2_GRID)]


def score_candidates(an: ImageAnalysis, sp: ScenePoints, camera: ViewCamera,
                     candidates: Sequence[Sequence[Command]], refine_top: int | None = None) -> np.ndarray:
    """Chamfer cost (px) of every candidate command list against the image.

    With ``refine_top`` the coarse pass (atoms only, forward only) ranks all candidates and
    only the best ``refine_top`` get the full symmetric cost; the others keep ``inf``.
    """
    samples = backward_samples(an, sp.names)
    costs = np.full(len(candidates), np.inf)
    if refine_top is None or refine_top >= len(candidates):
        for i, cmds in enumerate(candidates):
            costs[i] = match_cost(an, sp.moved(list(cmds)), camera, samples=samples).cost
        return costs
    atoms = sp.subset(sp.is_atom)
    if len(atoms.points) > COARSE_ATOMS:  # an even spread of atoms ranks the candidates as well, faster
        keep = np.zeros(len(atoms.points), bool)
        keep[np.linspace(0, len(atoms.points) - 1, COARSE_ATOMS).round().astype(int)] = True
        atoms = atoms.subset(keep)  # the centre of rotation stays the centroid of all atoms
    coarse = np.array([match_cost(an, atoms.moved(list(c)), camera, backward=False).cost for c in candidates])
    for i in np.argsort(coarse, kind="stable")[:refine_top]:
        costs[i] = match_cost(an, sp.moved(list(candidates[i])), camera, samples=samples).cost
    return costs


@dataclass(frozen=True)
class Ranking:
    """Candidates sorted by cost; ``answer_of`` maps a candidate to the answer it implies."""

    texts: tuple[str, ...]
    costs: np.ndarray
    answers: tuple[str, ...]

    @property
    def order(self) -> np.ndarray:
        return np.argsort(self.costs, kind="stable")

    @property
    def best(self) -> int:
        return int(self.order[0])

    @property
    def runner_up(self) -> int | None:
        """The best candidate whose answer differs from the best one's."""
        best_answer = self.answers[self.best]
        for i in self.order[1:]:
            if self.answers[int(i)] != best_answer and np.isfinite(self.costs[int(i)]):
                return int(i)
        return None

    @property
    def margin(self) -> float | None:
        r = self.runner_up
        return None if r is None else float(self.costs[r] - self.costs[self.best])

    def top(self, n: int = TOP_REPORTED) -> tuple[Candidate, ...]:
        return tuple(Candidate(self.texts[int(i)], float(self.costs[int(i)])) for i in self.order[:n]
                     if np.isfinite(self.costs[int(i)]))


def rank(candidates: Sequence, costs: np.ndarray, answer_of: Callable | None = None,
         text_of: Callable | None = None) -> Ranking:
    """A :class:`Ranking` of candidates (command lists by default, written as command strings)."""
    text_of = text_of or (lambda c: format_commands(list(c)) if not isinstance(c, str) else c)
    texts = tuple(text_of(c) for c in candidates)
    answers = tuple(answer_of(c) for c in candidates) if answer_of else texts
    return Ranking(texts, np.asarray(costs, float), answers)
