"""Views, the perspective camera and the command language (`move`, `roll`), in one place.

Conventions (docs/conventions.md and ../shared/docs/misi-bench.md, Scene and Commands):

* View (camera) coordinates: x to the right, y up, z toward the viewer. The camera sits at
  the origin and looks down −z; a point is visible when z < −NEAR.
* The initial front view puts the entry's own x, y, z axes on the screen axes, centres the
  centroid of the displayed atoms on the line of sight and pushes the scene back until its
  bounding sphere (plus a margin) fits the 30° horizontal field of view. Because the sphere
  is rotation invariant, the same distance frames all six views and nothing is clipped.
* The other views are the front view with the scene rolled about the centroid:
  left = ``roll y 90``, top = ``roll x 90``, back = ``roll y 180``, right = ``roll y -90``,
  bottom = ``roll x -90``.
* ``move a d`` translates the points by d Å along screen axis a. ``roll a θ`` rotates them
  by θ degrees about screen axis a through the centroid of the points being moved
  (right-hand rule). Commands apply left to right; the centroid moves with the points.

Everything here is a pure function of numpy arrays: a scene state is just the (N, 3)
array of view coordinates of its atoms.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from misi_agent.errors import MisiError

FOV_DEG = 30.0  # horizontal field of view (ChimeraX's default)
NEAR = 0.5  # Å; points closer to the camera than this are not drawn
FIT_MARGIN = 1.04  # bounding sphere radius is enlarged by this factor for the fit
ATOM_PAD = 1.2  # Å added to the sphere radius so atom balls and labels stay inside
AXES = ("x", "y", "z")
VIEW_NAMES = ("front", "left", "top", "back", "right", "bottom")
THREE_VIEWS = ("front", "left", "top")


class CommandError(MisiError):
    """A command string that cannot be parsed (one-line message)."""


@dataclass(frozen=True)
class Command:
    """One step of the answer language: ``move x 3`` or ``roll y -45``."""

    op: str  # "move" | "roll"
    axis: str  # "x" | "y" | "z"
    value: float  # Å for move, degrees for roll

    def __str__(self) -> str:
        return f"{self.op} {self.axis} {_fmt(self.value)}"


def _fmt(v: float) -> str:
    r = round(v)
    return str(int(r)) if abs(v - r) < 1e-6 else f"{v:.2f}".rstrip("0").rstrip(".")


VIEW_COMMANDS: dict[str, tuple[Command, ...]] = {
    "front": (),
    "left": (Command("roll", "y", 90),),
    "top": (Command("roll", "x", 90),),
    "back": (Command("roll", "y", 180),),
    "right": (Command("roll", "y", -90),),
    "bottom": (Command("roll", "x", -90),),
}

_CMD_RE = re.compile(r"^\s*(move|roll|translate|rotate|turn)\s+([xyzXYZ])\s*[:=]?\s*([+-]?\s*\d+(?:\.\d+)?)\s*(?:°|deg|degrees|Å|A|angstroms?)?\s*$", re.IGNORECASE)


def parse_commands(text: str) -> list[Command]:
    """Parse ``"roll x 30, move y -2"`` (also ``;`` or newlines as separators)."""
    if not isinstance(text, str) or not text.strip():
        raise CommandError("empty command string")
    out = []
    for part in re.split(r"[,;\n]+", text.strip()):
        if not part.strip():
            continue
        m = _CMD_RE.match(part)
        if not m:
            raise CommandError(f"malformed command {part.strip()!r} (expected 'move|roll x|y|z VALUE')")
        op = {"translate": "move", "rotate": "roll", "turn": "roll"}.get(m.group(1).lower(), m.group(1).lower())
        out.append(Command(op, m.group(2).lower(), float(m.group(3).replace(" ", ""))))
    if not out:
        raise CommandError("empty command string")
    return out


def format_commands(commands: list[Command] | tuple[Command, ...]) -> str:
    """``[Command(move x 3), Command(roll y 15)]`` -> ``"move x 3, roll y 15"``."""
    return ", ".join(str(c) for c in commands)


def rotation_matrix(axis: str, degrees: float) -> np.ndarray:
    """Right-hand-rule rotation about a screen axis (counter-clockwise seen from +axis)."""
    t = math.radians(degrees)
    c, s = math.cos(t), math.sin(t)
    if axis == "x":
        return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    if axis == "y":
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    if axis == "z":
        return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    raise CommandError(f"unknown axis {axis!r}")


def apply_command(points: np.ndarray, command: Command, center: np.ndarray | None = None) -> np.ndarray:
    """Apply one command to view-coordinate points; rolls turn about ``center`` (default: their centroid)."""
    pts = np.asarray(points, dtype=float)
    if command.op == "move":
        shift = np.zeros(3)
        shift[AXES.index(command.axis)] = command.value
        return pts + shift
    if command.op == "roll":
        c = pts.mean(axis=0) if center is None else np.asarray(center, float)
        return (pts - c) @ rotation_matrix(command.axis, command.value).T + c
    raise CommandError(f"unknown command {command.op!r}")


def apply_commands(points: np.ndarray, commands, center_of: np.ndarray | None = None) -> np.ndarray:
    """Apply commands left to right.

    Rolls turn about the centroid of ``points[center_of]`` (a mask or index array; default
    all points), recomputed after every step so it moves with the scene.
    """
    if isinstance(commands, str):
        commands = parse_commands(commands)
    pts = np.asarray(points, dtype=float)
    for cmd in commands:
        center = pts.mean(axis=0) if center_of is None else pts[center_of].mean(axis=0)
        pts = apply_command(pts, cmd, center)
    return pts


def compose_rigid(commands, center: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rigid transform (R, t) with ``apply_commands(P) == P @ R.T + t`` for a point set with centroid ``center``."""
    if isinstance(commands, str):
        commands = parse_commands(commands)
    R = np.eye(3)
    t = np.zeros(3)
    c = np.asarray(center, float)
    for cmd in commands:
        if cmd.op == "move":
            d = np.zeros(3)
            d[AXES.index(cmd.axis)] = cmd.value
            t = t + d
            c = c + d
        else:
            Q = rotation_matrix(cmd.axis, cmd.value)
            R = Q @ R
            t = Q @ (t - c) + c
    return R, t


# ----------------------------------------------------------------------------- camera


@dataclass(frozen=True)
class Camera:
    """A pinhole camera at the origin looking down −z, image ``width`` × ``height`` pixels."""

    width: int = 512
    height: int = 512
    fov_deg: float = FOV_DEG

    @property
    def focal(self) -> float:
        """Focal length in pixels, from the horizontal field of view."""
        return (self.width / 2.0) / math.tan(math.radians(self.fov_deg) / 2.0)

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Screen positions (N, 2) in pixels (origin top-left, x right, y down) and depths (N,) = −z."""
        pts = np.asarray(points, float)
        depth = -pts[:, 2]
        safe = np.where(depth > 1e-6, depth, np.nan)
        u = self.width / 2.0 + self.focal * pts[:, 0] / safe
        v = self.height / 2.0 - self.focal * pts[:, 1] / safe
        return np.stack([u, v], axis=1), depth

    def pixel_radius(self, radius: float | np.ndarray, depth: np.ndarray) -> np.ndarray:
        """Apparent radius in pixels of a sphere of ``radius`` Å at ``depth``."""
        return self.focal * np.asarray(radius, float) / np.maximum(np.asarray(depth, float), 1e-6)

    def visible(self, points: np.ndarray) -> np.ndarray:
        return -np.asarray(points, float)[:, 2] > NEAR


def fit_distance(points: np.ndarray, fov_deg: float = FOV_DEG, margin: float = FIT_MARGIN, pad: float = ATOM_PAD) -> float:
    """Camera distance that frames the bounding sphere of ``points`` about their centroid.

    The sphere (radius + ``pad`` Å, times ``margin``) subtends the field of view, so every
    view of the same scene fits without clipping.
    """
    pts = np.asarray(points, float)
    radius = (np.linalg.norm(pts - pts.mean(axis=0), axis=1).max() + pad) * margin
    return radius / math.sin(math.radians(fov_deg) / 2.0)


def initial_view(world: np.ndarray, view: str = "front", center: np.ndarray | None = None,
                 distance: float | None = None) -> np.ndarray:
    """View coordinates of world points in a canonical view.

    ``center`` (default: centroid of ``world``) is placed at (0, 0, −distance); ``distance``
    defaults to :func:`fit_distance` of ``world``. Pass the displayed atoms' centre and
    distance explicitly when placing a subset (e.g. only the ligand) in the same frame.
    """
    if view not in VIEW_COMMANDS:
        raise CommandError(f"unknown view {view!r} (expected one of {', '.join(VIEW_NAMES)})")
    pts = np.asarray(world, float)
    c = pts.mean(axis=0) if center is None else np.asarray(center, float)
    d = fit_distance(pts) if distance is None else distance
    R, _ = compose_rigid(VIEW_COMMANDS[view], np.zeros(3))
    return (pts - c) @ R.T + np.array([0.0, 0.0, -d])


def view_rotation(view: str) -> np.ndarray:
    """Rotation from world axes to view axes for a canonical view."""
    return compose_rigid(VIEW_COMMANDS[view], np.zeros(3))[0]
