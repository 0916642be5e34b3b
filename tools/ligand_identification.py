"""Which of an entry's ligands do the pictures show? Compare silhouettes.

An entry may hold several ligands (a drug and a cofactor, or copies in different chains),
and a question names only the PDB entry. Each candidate ligand defines a different scene:
its own pocket (residues within 10 Å), its own centroid and framing. Drawing each
candidate's scene in the pictured view as a plain silhouette and correlating it with the
picture's foreground (both blurred, so labels, shading and drawing style matter little)
tells which candidate the picture shows. Nothing here depends on our renderer's look:
the picture's background is estimated from its border, and only the camera conventions
of the benchmark (canonical views, 30° perspective, the fit of the scene) are assumed.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw
from scipy.ndimage import gaussian_filter, zoom

from misi_agent.camera import Camera
from misi_agent.errors import MisiError
from misi_agent.scene import Scene

WORK_SIZE = 128  # silhouettes are compared at this width (pixels)


def load_rgb(image: str | Path | Image.Image | np.ndarray) -> np.ndarray:
    """An image as an (H, W, 3) float array in [0, 1]."""
    if isinstance(image, np.ndarray):
        arr = image
    else:
        try:
            img = image if isinstance(image, Image.Image) else Image.open(image)
            arr = np.asarray(img.convert("RGB"))
        except (OSError, ValueError) as exc:
            raise MisiError(f"cannot read image {image}: {exc}") from None
    arr = np.asarray(arr, dtype=float)
    return arr / 255.0 if arr.max() > 1.0 else arr


def foreground(rgb: np.ndarray) -> np.ndarray:
    """Pixels that differ from the background, which is the median colour of the border."""
    border = np.concatenate([rgb[0], rgb[-1], rgb[:, 0], rgb[:, -1]])
    bg = np.median(border, axis=0)
    diff = np.abs(rgb - bg).max(axis=2)
    return (diff > 0.12).astype(float)


def grey(rgb: np.ndarray) -> np.ndarray:
    """Mid-brightness unsaturated pixels: the ligand's carbons (the benchmark draws them grey).

    Near-white label text and the saturated element and residue colours are excluded.
    """
    hi, lo = rgb.max(axis=2), rgb.min(axis=2)
    return (((hi - lo) < 0.12 * np.maximum(hi, 1e-6) + 0.02) & (hi > 0.18) & (hi < 0.8)).astype(float)


def silhouette(scene: Scene, width: int, height: int, ligand_carbons_only: bool = False) -> np.ndarray:
    """A plain drawing of the scene's bonds and atoms (1 = drawn) as our camera sees it.

    With ``ligand_carbons_only`` just the ligand's carbon atoms and the bonds between them.
    """
    cam = Camera(width, height)
    screen, depth = cam.project(scene.coords)
    ok = depth > 0.5
    keep = np.ones(len(scene), bool)
    if ligand_carbons_only:
        keep = scene.is_ligand & (np.char.upper(scene.elements.astype(str)) == "C")
    img = Image.new("L", (width, height), 0)
    draw = ImageDraw.Draw(img)
    w = max(1, int(round(width / 170)))
    for a, b in scene.bonds:
        if ok[a] and ok[b] and keep[a] and keep[b]:
            draw.line([tuple(screen[a]), tuple(screen[b])], fill=255, width=w)
    r = cam.pixel_radius(0.45, depth)
    for i in np.flatnonzero(ok & scene.is_ligand & keep):
        x, y = screen[i]
        draw.ellipse([x - r[i], y - r[i], x + r[i], y + r[i]], fill=255)
    return np.asarray(img, dtype=float) / 255.0


def _blurred(mask: np.ndarray) -> np.ndarray:
    f = WORK_SIZE / mask.shape[1]
    small = zoom(mask, f, order=1) if f < 1 else mask
    out = gaussian_filter(small, sigma=WORK_SIZE / 48)
    out = out - out.mean()
    n = np.linalg.norm(out)
    return out / n if n > 0 else out


def similarity(picture: np.ndarray, scene: Scene) -> float:
    """Mean of two correlations (each −1..1) between the picture and the scene drawn by our camera:
    the blurred foreground against the whole silhouette, and the blurred grey pixels against the
    ligand's carbons (which tells apart neighbouring ligands that share most of a pocket)."""
    h, w = picture.shape[:2]
    whole = float((_blurred(foreground(picture)) * _blurred(silhouette(scene, w, h))).sum())
    if not scene.is_ligand.any():
        return whole
    lig = float((_blurred(grey(picture)) * _blurred(silhouette(scene, w, h, ligand_carbons_only=True))).sum())
    return 0.5 * (whole + lig)


@dataclass(frozen=True)
class LigandMatch:
    """How well each candidate's scene matches the picture; ``best`` indexes ``scores``."""

    scores: tuple[float, ...]
    best: int
    margin: float

    def to_dict(self) -> dict:
        return {"scores": [round(s, 4) for s in self.scores], "best": self.best, "margin": round(self.margin, 4)}


def match_candidates(picture, scenes: Sequence[Scene]) -> LigandMatch:
    """Score candidate scenes (each already in the pictured view) against one picture."""
    if not scenes:
        raise MisiError("no candidate scenes to match")
    rgb = load_rgb(picture)
    scores = [similarity(rgb, s) for s in scenes]
    order = np.argsort(-np.asarray(scores), kind="stable")
    margin = scores[order[0]] - scores[order[1]] if len(scores) > 1 else 1.0
    return LigandMatch(tuple(scores), int(order[0]), float(margin))
