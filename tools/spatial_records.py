"""Result records of the spatial tools: what was seen, how a structure was registered, what was answered.

Every record is a frozen dataclass with ``to_dict()`` giving plain JSON types, so the agent
can hand it to a model and a person can read it. Numbers are rounded where more digits
would only be noise (pixels to 0.01, Å to 0.001).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


def _r(x: float | None, nd: int = 3) -> float | None:
    if x is None:
        return None
    x = float(x)
    return round(x, nd) if np.isfinite(x) else None


@dataclass(frozen=True)
class DetectedAtom:
    """One atom seen in an image: a ball of the ligand (ball-and-stick) drawn in one colour class.

    ``x``, ``y`` are pixels (x right, y down, origin at the top-left corner, pixel centres at
    half-integers as :meth:`misi_agent.camera.Camera.project` places them); ``radius`` is the
    apparent ball radius in pixels; ``color_class`` is ``O``, ``N``, ``LIGAND_C`` or ``OTHER``
    (an element drawn in another colour: S, P, halogens); ``strength`` is the ball radius over
    the stick half-width of the same image (larger = more clearly a ball, not a stick joint).
    """

    x: float
    y: float
    radius: float
    color_class: str
    strength: float

    def to_dict(self) -> dict[str, Any]:
        return {"x": _r(self.x, 2), "y": _r(self.y, 2), "radius": _r(self.radius, 2),
                "color_class": self.color_class, "strength": _r(self.strength, 2)}


@dataclass(frozen=True)
class AtomDetection:
    """Everything :func:`misi_agent.tools.atom_detection.detect_atoms` found in one image.

    ``atoms`` are the ligand balls; ``class_pixels`` counts the pixels of every colour class
    (pocket sticks are measured as coloured pixels, not as single atoms); ``colors`` gives the
    class colours as calibrated from this image (mean RGB of the pixels of the class);
    ``stick_halfwidth`` the typical stick half-width in pixels; ``background`` the estimated
    background RGB.
    """

    width: int
    height: int
    atoms: tuple[DetectedAtom, ...]
    class_pixels: dict[str, int]
    colors: dict[str, tuple[int, int, int]]
    stick_halfwidth: float
    background: tuple[int, int, int]
    notes: tuple[str, ...] = ()

    @property
    def centres(self) -> np.ndarray:
        return np.array([[a.x, a.y] for a in self.atoms], float).reshape(-1, 2)

    @property
    def radii(self) -> np.ndarray:
        return np.array([a.radius for a in self.atoms], float)

    @property
    def classes(self) -> list[str]:
        return [a.color_class for a in self.atoms]

    def to_dict(self) -> dict[str, Any]:
        return {"width": self.width, "height": self.height, "n_atoms": len(self.atoms),
                "atoms": [a.to_dict() for a in self.atoms], "class_pixels": dict(self.class_pixels),
                "colors": {k: list(v) for k, v in self.colors.items()},
                "stick_halfwidth": _r(self.stick_halfwidth, 2), "background": list(self.background),
                "notes": list(self.notes)}


@dataclass(frozen=True)
class Correspondence:
    """A scene atom matched to a detected ball: scene index, atom name, detected index, distance (px)."""

    atom_index: int
    atom_name: str
    detected_index: int
    distance_px: float

    def to_dict(self) -> dict[str, Any]:
        return {"atom_index": self.atom_index, "atom_name": self.atom_name, "detected_index": self.detected_index,
                "distance_px": _r(self.distance_px, 2)}


@dataclass(frozen=True)
class Registration:
    """How a structure's scene maps onto an image.

    The camera is the benchmark's pinhole camera (horizontal field of view ``fov_deg``, image
    centre on the optical axis) looking at the scene shifted by ``shift`` Å:
    ``camera coordinates = view coordinates + shift``. ``shift`` ≈ 0 means the image follows
    the benchmark's framing exactly.

    Fit quality, in pixels of this image: ``residual_px`` is the median distance from the
    predicted atoms (in the image, in front of the camera) to the nearest pixel of their colour
    class; ``chamfer_px`` the symmetric truncated chamfer distance between predicted atoms and
    bonds and the class pixels; ``matched`` the share of predicted atoms with a same-class pixel
    within ``match_tol_px``; ``explained`` the share of detected class pixels (stick centre
    lines) with a predicted atom or bond point of their class within the same tolerance.
    ``ok`` says the structure fits the image; when it is False the tools that rely on it say
    they are unsure (wrong PDB ID, wrong ligand copy, or an image of something else).
    """

    width: int
    height: int
    fov_deg: float
    shift: tuple[float, float, float]
    residual_px: float
    chamfer_px: float
    matched: float
    explained: float
    match_tol_px: float
    ok: bool
    n_atoms_in_image: int
    correspondences: tuple[Correspondence, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"width": self.width, "height": self.height, "fov_deg": _r(self.fov_deg, 3),
                "shift": [_r(v, 3) for v in self.shift], "residual_px": _r(self.residual_px, 2),
                "chamfer_px": _r(self.chamfer_px, 2), "matched": _r(self.matched, 3),
                "explained": _r(self.explained, 3), "match_tol_px": _r(self.match_tol_px, 2), "ok": self.ok,
                "n_atoms_in_image": self.n_atoms_in_image,
                "correspondences": [c.to_dict() for c in self.correspondences], "notes": list(self.notes)}


@dataclass(frozen=True)
class Candidate:
    """One scored hypothesis: its text (a command string or an option letter) and its score (px, lower is better)."""

    text: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "score": _r(self.score, 3)}


@dataclass(frozen=True)
class SpatialAnswer:
    """A geometric task's answer with the evidence for it.

    ``answer`` is the task's exact answer string; ``score`` the best hypothesis's mismatch in
    pixels (symmetric truncated chamfer distance between the predicted atoms and the image,
    lower is better); ``runner_up``/``runner_up_score`` the best hypothesis that gives a
    different answer; ``margin`` = runner_up_score − score (px; larger = surer);
    ``residual`` the worst registration residual (px) of the images the structure was
    registered to; ``confident`` is True when every registration fits and the margin is
    clear. ``top`` lists the best few hypotheses; ``details`` holds task-specific findings
    (inferred commands, option scores, registrations).
    """

    task: str
    answer: str
    score: float
    runner_up: str | None
    runner_up_score: float | None
    margin: float | None
    residual: float | None
    confident: bool
    notes: tuple[str, ...] = ()
    top: tuple[Candidate, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "answer": self.answer, "score": _r(self.score, 3), "runner_up": self.runner_up,
                "runner_up_score": _r(self.runner_up_score, 3), "margin": _r(self.margin, 3),
                "residual": _r(self.residual, 2), "confident": self.confident, "notes": list(self.notes),
                "top": [c.to_dict() for c in self.top], "details": _plain(self.details)}


def _plain(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float):
        return _r(value, 4)
    return value
