"""The renderer interface: a scene in, a PNG plus every atom's screen position out.

Both backends (the built-in raster renderer and PyMOL) draw the same :class:`Scene` with
the same :class:`~misi_agent.camera.Camera`, so the per-atom screen positions they report
come from one projection (:func:`project_scene`) and must match what the pixels show.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
from PIL import Image

from misi_agent.camera import Camera
from misi_agent.errors import MisiError
from misi_agent.scene import Scene

ATOM_RADIUS_LIGAND = 0.45  # Å, ball radius of ligand atoms (ball-and-stick)
STICK_RADIUS = 0.18  # Å, bond stick radius
BACKGROUND = (0, 0, 0)


@dataclass(frozen=True)
class Rendering:
    """A rendered image and, for every scene atom, where it landed.

    ``screen`` is (N, 2) pixels (x right, y down, origin top-left), ``depth`` the distance
    along the line of sight (Å), ``radius_px`` the apparent ball radius, ``visible`` whether
    the atom is in front of the near plane and inside the image.
    """

    image: Image.Image
    screen: np.ndarray
    depth: np.ndarray
    radius_px: np.ndarray
    visible: np.ndarray
    renderer: str

    def png_bytes(self) -> bytes:
        buf = io.BytesIO()
        self.image.save(buf, format="PNG", optimize=False)
        return buf.getvalue()

    def save(self, path) -> None:
        self.image.save(path, format="PNG")


def project_scene(scene: Scene, camera: Camera, radius: float = ATOM_RADIUS_LIGAND):
    """Screen positions, depths, apparent radii and visibility of the scene's atoms."""
    screen, depth = camera.project(scene.coords)
    rad = camera.pixel_radius(radius, depth)
    inside = (screen[:, 0] >= 0) & (screen[:, 0] < camera.width) & (screen[:, 1] >= 0) & (screen[:, 1] < camera.height)
    visible = camera.visible(scene.coords) & np.nan_to_num(inside, nan=False).astype(bool)
    return screen, depth, rad, visible


class Renderer(Protocol):
    """A backend that draws scenes. ``render_many`` lets a slow backend batch work in one worker."""

    name: str

    def render(self, scene: Scene, size: int = 512) -> Rendering: ...

    def render_many(self, scenes: Sequence[Scene], size: int = 512) -> list[Rendering]: ...


RENDERERS = ("raster", "pymol")


def get_renderer(name: str) -> Renderer:
    """The backend called ``name`` (``raster`` or ``pymol``)."""
    if name == "raster":
        from misi_agent.render.raster import RasterRenderer

        return RasterRenderer()
    if name == "pymol":
        from misi_agent.render.pymol_backend import PyMOLRenderer

        return PyMOLRenderer()
    raise MisiError(f"unknown renderer {name!r} (expected one of {', '.join(RENDERERS)})")
