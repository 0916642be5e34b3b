"""Shared by tests: a complex drawn in the benchmark's six views by either renderer."""
from __future__ import annotations

from typing import Any

VIEWS = ("front", "left", "top", "back", "right", "bottom")


def six_views(cx, renderer: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(scenes, images) of ``cx`` in the six canonical views, drawn by ``renderer`` (``pymol`` or ``raster``)."""
    from misi_agent.render.raster import RasterRenderer
    from misi_agent.scene import scene_from_complex

    scenes = {v: scene_from_complex(cx, v) for v in VIEWS}
    if renderer == "pymol":
        from misi_agent.render.pymol_backend import PyMOLRenderer

        with PyMOLRenderer() as ren:
            return scenes, {v: ren.render(sc).image for v, sc in scenes.items()}
    return scenes, {v: RasterRenderer().render(sc).image for v, sc in scenes.items()}
