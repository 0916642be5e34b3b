"""The built-in raster renderer: numpy + Pillow, fast, deterministic, MiSI-Bench look.

Why a home-made renderer: task generation draws thousands of images, and PyMOL in a worker
process is slow; this one draws a typical pocket (400–800 atoms) at 512×512 in a few tens of
milliseconds (``benchmarks/render_speed.py``) and gives the same bytes for the same scene.

Look (MiSI-Bench, ChimeraX-like, black background):

* Pocket residues as sticks: every bond is two thick line halves, each in its own atom's
  colour, with a small joint disc at every atom; a dark edge line under a lighter core line
  gives the sticks a cylindrical look.
* The ligand as ball-and-stick: balls of :data:`~misi_agent.render.base.ATOM_RADIUS_LIGAND`
  Å projected with the perspective camera, shaded with concentric lighter discs shifted
  toward the upper left plus a small highlight; thinner sticks; double bonds as two
  parallel lines, triple bonds as three.
* Colours from :meth:`Scene.colors` (O red, N blue, ligand C grey, pocket carbons alternating
  ``#BF99F2`` / ``#F2B366``), faded toward black with depth (factor 1.0 at the nearest
  atom, :data:`DEPTH_CUE_FAR` at the farthest) so near and far are told apart.
* Painter's algorithm: all primitives sorted once by depth, far first. A ball is keyed by
  its front surface, a half bond by its mean depth, so sticks disappear into balls.
* Antialiasing: primitives are drawn at :data:`SUPERSAMPLE`× resolution and box-filtered
  down; labels are drawn afterwards at the final resolution (FreeType antialiases text).
* Labels on top: ``ARG 45`` at every residue's CA (:meth:`Scene.labels`) in light yellow
  (:data:`RESIDUE_LABEL_COLOR`), the atom name at every ligand atom in light cyan
  (:data:`LIGAND_LABEL_COLOR`), both with a thin black outline, Pillow's bundled font
  (deterministic) at about 11 px for 512 px images. Each label sits just outside its
  anchor in the first free spot among a few candidates (:func:`place_labels`: ligand
  names first, away from the ligand's centre; residue labels avoid them and the ligand),
  clamped inside the image so nothing is clipped (one pixel of black border stays free).

Atoms behind the camera's near plane are not drawn; bonds to them neither.
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from misi_agent.camera import NEAR, Camera
from misi_agent.render.base import ATOM_RADIUS_LIGAND, BACKGROUND, STICK_RADIUS, Rendering, project_scene
from misi_agent.scene import Scene

SUPERSAMPLE = 2  # primitives are drawn at this multiple of the output size, then box-filtered
DEPTH_CUE_FAR = 0.45  # colour factor at the farthest atom (1.0 at the nearest)
POCKET_STICK_RADIUS = STICK_RADIUS  # Å
LIGAND_STICK_RADIUS = 0.11  # Å, thinner than the pocket's so the balls stand out
STICK_EDGE = 0.6  # brightness of a stick's edge relative to its core
BALL_SHADES = (  # (radius fraction, shift toward upper left as radius fraction, brightness, white mix)
    (1.00, 0.00, 0.55, 0.0),
    (0.82, 0.10, 0.80, 0.0),
    (0.58, 0.22, 1.00, 0.0),
    (0.30, 0.34, 1.00, 0.35),
    (0.13, 0.40, 1.00, 0.75),
)
RESIDUE_LABEL_COLOR = (255, 250, 200)  # light yellow: residue name and number
LIGAND_LABEL_COLOR = (150, 235, 255)  # light cyan: ligand atom names
LABEL_OUTLINE = (0, 0, 0)
LABEL_PX_AT_512 = 11  # font size at 512 px, scaled with the image size


@lru_cache(maxsize=16)
def label_font(size: int) -> ImageFont.FreeTypeFont:
    """Pillow's bundled font at ``size`` px (same glyphs on every machine)."""
    return ImageFont.load_default(size=size)


def label_font_size(image_size: int) -> int:
    return max(8, int(round(LABEL_PX_AT_512 * image_size / 512)))


def depth_cue(depth: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """Brightness factor per atom: 1.0 at the nearest drawn atom, DEPTH_CUE_FAR at the farthest."""
    f = np.ones(len(depth))
    if drawn.any():
        d = depth[drawn]
        lo, hi = float(d.min()), float(d.max())
        span = hi - lo
        if span > 1e-9:
            f[drawn] = 1.0 - (1.0 - DEPTH_CUE_FAR) * (depth[drawn] - lo) / span
    return f


LINE, DISC = 0, 1  # primitive kinds in the draw table


def _bond_segments(scene: Scene, xy: np.ndarray, depth: np.ndarray, drawn: np.ndarray, focal_ss: float):
    """Half-bond line segments: (start, stop, sort key, width px, atom index for the colour).

    Each bond a–b becomes a→mid in a's colour and mid→b in b's colour. Ligand double and
    triple bonds become two or three parallel lines offset perpendicular on screen.
    """
    bonds = np.asarray(scene.bonds, int).reshape(-1, 2)
    orders = np.asarray(scene.bond_orders, int).reshape(-1)
    if len(bonds):
        ok = drawn[bonds[:, 0]] & drawn[bonds[:, 1]]
        bonds, orders = bonds[ok], orders[ok]
    if not len(bonds):
        return None
    lig = np.asarray(scene.is_ligand, bool)
    a, b = bonds[:, 0], bonds[:, 1]
    both_lig = lig[a] & lig[b]
    dmid = (depth[a] + depth[b]) / 2.0
    rad = np.where(both_lig, LIGAND_STICK_RADIUS, POCKET_STICK_RADIUS)
    width = np.maximum(2.0, 2.0 * rad * focal_ss / dmid)
    d = xy[b] - xy[a]
    length = np.maximum(np.hypot(d[:, 0], d[:, 1]), 1e-9)
    perp = np.stack([-d[:, 1], d[:, 0]], axis=1) / length[:, None]
    copies = np.where(both_lig, np.clip(orders, 1, 3), 1)
    # Halves: first all a→mid, then all b→mid.
    end = np.concatenate([a, b])
    mid = np.concatenate([(xy[a] + xy[b]) / 2.0] * 2)
    key = (depth[end] + np.concatenate([dmid, dmid])) / 2.0
    width2 = np.concatenate([width, width])
    perp2 = np.concatenate([perp, perp])
    copies2 = np.concatenate([copies, copies])
    rep = np.repeat(np.arange(len(end)), copies2)
    first = np.repeat(np.cumsum(copies2) - copies2, copies2)
    k = np.arange(len(rep)) - first
    n = copies2[rep]
    shift = (k - (n - 1) / 2.0) * 1.6 * width2[rep]  # 0 for single; ±0.8 w for double; 0, ±1.6 w for triple
    offset = perp2[rep] * shift[:, None]
    start = xy[end[rep]] + offset
    stop = mid[rep] + offset
    return start, stop, key[rep], width2[rep], end[rep]


def primitive_table(scene: Scene, camera: Camera, screen: np.ndarray, depth: np.ndarray, drawn: np.ndarray,
                    ss: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Every line and disc to draw, sorted far first: (coords (K, 4) float, ints (K, 5) = kind, width, r, g, b).

    Built with numpy in one pass so the drawing loop does nothing but call Pillow.
    """
    if not drawn.any():
        return None
    lig = np.asarray(scene.is_ligand, bool)
    focal_ss = camera.focal * ss
    safe_depth = np.where(drawn, depth, 1.0)
    xy = np.where(drawn[:, None], np.nan_to_num(screen), 0.0) * ss
    raw = scene.colors().astype(float)
    cue = depth_cue(depth, drawn)
    base = raw * cue[:, None]

    keys, coords, widths, colors = [], [], [], []

    def add(key, c4, width, color):
        keys.append(np.asarray(key, float))
        coords.append(np.asarray(c4, float).reshape(-1, 4))
        widths.append(np.asarray(width, int))
        colors.append(np.asarray(color, float).reshape(-1, 3))

    segs = _bond_segments(scene, xy, depth, drawn, focal_ss)
    if segs is not None:
        start, stop, key, w, atom = segs
        c4 = np.concatenate([start, stop], axis=1)
        w_edge = np.maximum(1, np.rint(w)).astype(int)
        w_core = np.maximum(1, np.rint(w * 0.5)).astype(int)
        add(key, c4, w_edge, base[atom] * STICK_EDGE)
        core = w_edge >= 3
        add(key[core], c4[core], w_core[core], base[atom[core]])

    idx = np.flatnonzero(drawn)
    r_ball = ATOM_RADIUS_LIGAND * focal_ss / safe_depth
    r_joint = POCKET_STICK_RADIUS * focal_ss / safe_depth
    pocket = idx[~lig[idx]]
    if pocket.size:
        r = np.maximum(r_joint[pocket], 1.0)
        key = depth[pocket] - POCKET_STICK_RADIUS
        cx, cy = xy[pocket, 0], xy[pocket, 1]
        add(key, np.stack([cx - r, cy - r, cx + r, cy + r], 1), np.zeros(pocket.size), base[pocket] * STICK_EDGE)
        rc = r * 0.5
        core = rc >= 1.0
        add(key[core], np.stack([cx - rc, cy - rc, cx + rc, cy + rc], 1)[core], np.zeros(int(core.sum())), base[pocket[core]])
    ligand = idx[lig[idx]]
    if ligand.size:
        r = r_ball[ligand]
        key = depth[ligand] - ATOM_RADIUS_LIGAND
        for frac, shift, bright, white in BALL_SHADES:
            rr = r * frac
            keep = (rr >= 0.75) | (frac == 1.0)
            cx = xy[ligand, 0] - shift * r
            cy = xy[ligand, 1] - shift * r
            c4 = np.stack([cx - rr, cy - rr, cx + rr, cy + rr], 1)
            shade = (raw[ligand] * bright * (1.0 - white) + 255.0 * white) * cue[ligand, None]
            add(key[keep], c4[keep], np.zeros(int(keep.sum())), shade[keep])

    key = np.concatenate(keys)
    kinds = np.concatenate([np.full(len(k), LINE if i < (2 if segs is not None else 0) else DISC)
                            for i, k in enumerate(keys)])
    # Far first; equal keys keep creation order (edge before core, ball shades inside out).
    order = np.lexsort((np.arange(len(key)), -key))
    c4 = np.concatenate(coords)[order]
    ints = np.empty((len(order), 5), dtype=np.int64)
    ints[:, 0] = kinds[order]
    ints[:, 1] = np.concatenate(widths)[order]
    ints[:, 2:] = np.clip(np.rint(np.concatenate(colors)[order]), 0, 255).astype(np.int64)
    return c4, ints


class RasterRenderer:
    """Draw scenes with Pillow; see the module docstring for the look.

    ``labels=False`` leaves the text out (used to compare and for label-free thumbnails).
    """

    name = "raster"

    def __init__(self, labels: bool = True, supersample: int = SUPERSAMPLE):
        self.labels = labels
        self.supersample = max(1, int(supersample))

    # ------------------------------------------------------------------ public API

    def render(self, scene: Scene, size: int = 512) -> Rendering:
        """Draw ``scene`` into a ``size``×``size`` RGB image."""
        camera = Camera(size, size)
        screen, depth, radius_px, visible = project_scene(scene, camera)
        drawn = camera.visible(scene.coords)  # in front of the near plane
        image = self._draw_primitives(scene, camera, screen, depth, drawn, size)
        if self.labels:
            self._draw_labels(image, scene, camera, size)
        return Rendering(image=image, screen=screen, depth=depth, radius_px=radius_px, visible=visible,
                         renderer=self.name)

    def render_many(self, scenes: Sequence[Scene], size: int = 512) -> list[Rendering]:
        return [self.render(s, size) for s in scenes]

    # ------------------------------------------------------------------ primitives

    def _draw_primitives(self, scene: Scene, camera: Camera, screen: np.ndarray, depth: np.ndarray,
                         drawn: np.ndarray, size: int) -> Image.Image:
        """All sticks and balls, far first, at supersampled resolution, box-filtered down."""
        ss = self.supersample
        image = Image.new("RGB", (size * ss, size * ss), BACKGROUND)
        ops = primitive_table(scene, camera, screen, depth, drawn, ss)
        if ops is not None:
            coords, ints = ops
            draw = ImageDraw.Draw(image)
            line, ellipse = draw.line, draw.ellipse
            for xy, (kind, width, r, g, b) in zip(coords.tolist(), ints.tolist()):
                if kind == LINE:
                    line(xy, fill=(r, g, b), width=width)
                else:
                    ellipse(xy, fill=(r, g, b))
        return image.reduce(ss) if ss > 1 else image

    # ------------------------------------------------------------------ labels

    def _draw_labels(self, image: Image.Image, scene: Scene, camera: Camera, size: int) -> None:
        """Residue labels, then ligand atom names on top of them."""
        for text, color, x, y in sorted(place_labels(scene, camera, size), key=lambda p: p[1] == LIGAND_LABEL_COLOR):
            sprite, mask = label_sprite(text, label_font_size(size), color)
            image.paste(sprite, (x, y), mask)


LABEL_TURNS = (0.0, 45.0, -45.0, 90.0, -90.0, 135.0, -135.0, 180.0)  # candidate directions, degrees from the preferred one
LABEL_RINGS = (0.0, 1.0, 2.0, 3.0)  # extra distance from the anchor, in label heights: next to it, then further out


_CANDIDATES = tuple((r, t) for r in LABEL_RINGS for t in LABEL_TURNS)


def place_labels(scene: Scene, camera: Camera, size: int) -> list[tuple[str, tuple[int, int, int], int, int]]:
    """Where every label goes: (text, colour, x, y of the tile's top-left corner).

    A label sits just outside its anchor (the residue's CA, the ligand atom) in the first of
    eight directions whose tile overlaps no label placed before it and no ligand ball (then
    the same eight one, two and three text lines further out), else in the least crowded of them. Preferred direction: upper right for residues, away from the
    ligand's screen centre for ligand atoms (spreads the names of a compact ligand). Ligand
    names are placed first, then residue labels nearest first. Tiles are clamped inside the
    image, leaving its outermost pixel row and column black.
    """
    labels = scene.labels()
    if not labels:
        return []
    n_lig = int(np.count_nonzero(scene.is_ligand))
    n_res = len(labels) - n_lig
    anchors = np.array([p for _, p in labels], float).reshape(-1, 3)
    front = -anchors[:, 2] > NEAR
    screen, depth = camera.project(anchors)
    screen = np.nan_to_num(screen)
    radius = camera.pixel_radius(ATOM_RADIUS_LIGAND, np.where(front, depth, 1.0))
    gap = radius + 1.0
    angle = np.full(len(labels), -45.0)  # screen y points down: -45° is upper right
    lig_front = front[n_res:]
    if n_lig and lig_front.any():
        centre = screen[n_res:][lig_front].mean(axis=0)
        out = screen[n_res:] - centre
        far = np.hypot(out[:, 0], out[:, 1]) > 1e-6
        angle[n_res:] = np.where(far, np.degrees(np.arctan2(out[:, 1], out[:, 0])), -45.0)

    occupied = np.zeros((size, size), bool)
    for k in range(n_res, len(labels)):  # ligand balls: their inscribed squares
        if front[k]:
            h = radius[k] * 0.7
            x0, y0 = int(max(0, screen[k, 0] - h)), int(max(0, screen[k, 1] - h))
            x1, y1 = int(min(size, screen[k, 0] + h + 1)), int(min(size, screen[k, 1] + h + 1))
            if x1 > x0 and y1 > y0:
                occupied[y0:y1, x0:x1] = True

    font_px = label_font_size(size)
    res_order = sorted((k for k in range(n_res) if front[k]), key=lambda k: (depth[k], k))
    placed = []
    lig_order = [k for k in range(n_res, len(labels)) if front[k]]
    for k in lig_order + res_order:
        if k == (res_order[0] if res_order else None):
            _mark_ligand(occupied, scene, camera, size)  # residue labels keep off the whole ligand
        text = labels[k][0]
        color = LIGAND_LABEL_COLOR if k >= n_res else RESIDUE_LABEL_COLOR
        w, h = label_sprite(text, font_px, color)[1].size
        # All candidate tiles at once; the tile's nearest edge sits ``gap`` px (plus the ring)
        # from the anchor along the direction.
        ax, ay, ak, gk = float(screen[k, 0]), float(screen[k, 1]), float(angle[k]), float(gap[k])
        candidates = []
        for ring, turn in _CANDIDATES:
            t = math.radians(ak + turn)
            dx, dy = math.cos(t), math.sin(t)
            g = gk + ring * h
            x = int(round(min(max(ax + dx * g - w / 2.0 + dx * w / 2.0, 1.0), size - 1.0 - w)))
            y = int(round(min(max(ay + dy * g - h / 2.0 + dy * h / 2.0, 1.0), size - 1.0 - h)))
            if not occupied[y:y + h, x:x + w].any():
                break
            candidates.append((int(np.count_nonzero(occupied[y:y + h, x:x + w])), len(candidates), x, y))
        else:  # no free spot: the least crowded (first on ties)
            _, _, x, y = min(candidates)
        occupied[max(0, y - 1):y + h + 1, max(0, x - 1):x + w + 1] = True
        placed.append((text, color, x, y))
    return placed


def _mark_ligand(occupied: np.ndarray, scene: Scene, camera: Camera, size: int) -> None:
    """Mark the ligand's balls (bounding squares) and bonds (sampled every pixel, 3 px wide) as occupied."""
    lig = np.asarray(scene.is_ligand, bool)
    coords = scene.coords[lig]
    front = -coords[:, 2] > NEAR
    if not front.any():
        return
    screen, depth = camera.project(coords)
    radius = camera.pixel_radius(ATOM_RADIUS_LIGAND, np.where(front, depth, 1.0))
    for (x, y), r in zip(screen[front], radius[front]):
        x0, y0 = int(max(0, x - r - 1)), int(max(0, y - r - 1))
        x1, y1 = int(min(size, x + r + 2)), int(min(size, y + r + 2))
        if x1 > x0 and y1 > y0:
            occupied[y0:y1, x0:x1] = True
    index = -np.ones(len(scene), int)
    index[lig] = np.arange(int(lig.sum()))
    bonds = np.asarray(scene.bonds, int).reshape(-1, 2)
    bonds = index[bonds[(index[bonds] >= 0).all(axis=1)]]
    bonds = bonds[front[bonds].all(axis=1)] if len(bonds) else bonds
    if not len(bonds):
        return
    a, b = screen[bonds[:, 0]], screen[bonds[:, 1]]
    n = int(np.hypot(*(b - a).T).max()) + 2
    t = np.linspace(0.0, 1.0, n)[None, :, None]
    pts = np.rint(a[:, None, :] + t * (b - a)[:, None, :]).astype(int).reshape(-1, 2)
    pts = (pts[:, None, :] + _NEIGHBOURS[None, :, :]).reshape(-1, 2)  # 3 px wide
    ok = (pts >= 0).all(axis=1) & (pts < size).all(axis=1)
    occupied[pts[ok, 1], pts[ok, 0]] = True


_NEIGHBOURS = np.array([(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)], int)


@lru_cache(maxsize=4096)
def label_sprite(text: str, font_px: int, color: tuple[int, int, int]) -> tuple[Image.Image, Image.Image]:
    """The label as an RGB tile and its alpha mask: ``color`` text with a 1 px black outline.

    Cached because the same residue labels and ligand atom names recur across the views of a
    complex and across complexes.
    """
    font = label_font(font_px)
    left, top, right, bottom = font.getbbox(text)
    w, h = max(1, right - left) + 2, max(1, bottom - top) + 2  # one pixel of outline all round
    fill = Image.new("L", (w, h), 0)
    ImageDraw.Draw(fill).text((1 - left, 1 - top), text, fill=255, font=font)
    mask = fill.filter(ImageFilter.MaxFilter(3))  # the outline: the glyphs grown by one pixel
    sprite = Image.new("RGB", (w, h), LABEL_OUTLINE)
    sprite.paste(color, (0, 0, w, h), fill)
    return sprite, mask
