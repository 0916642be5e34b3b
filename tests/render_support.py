"""Shared by tests: a complex drawn in the benchmark's six views by either renderer."""
from __future__ import annotations

from typing import Any

import numpy as np

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


def labelled_reconstruction(cx, renderer: str) -> tuple[Any, Any, Any, Any, Any, Any]:
    """``cx``'s six views drawn and reconstructed as the T9 pipeline starts (labels read, hidden residue labels
    spotted, the scale taken from the residue labels): the reconstruction, the labels, the label spotters, the front
    scene, a function taking a point of the reconstruction's front frame to the front scene's (Å), and the pictures
    (view -> image), for a step that fits to them."""
    from misi_agent.tools.label_reading import read_labels
    from misi_agent.tools.label_spotting import spotters, with_hidden_residue_labels
    from misi_agent.tools.label_triangulation import rescaled_by_residue_labels
    from misi_agent.tools.reconstruction import load_views, reconstruct

    scenes, images = six_views(cx, renderer)
    labels = with_hidden_residue_labels(images, {v: read_labels(im) for v, im in images.items()})
    rec = rescaled_by_residue_labels(images, load_views(images), reconstruct(images), labels)
    front = scenes["front"]
    D, d = -float(front.centroid[2]), float(rec.distance)
    to_true = lambda p: (np.asarray(p, float) + [0, 0, d]) / d * D - [0, 0, D]  # noqa: E731
    return rec, labels, spotters(images, labels), front, to_true, images
