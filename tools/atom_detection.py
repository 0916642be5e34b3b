"""See the atoms in a rendered image: colour classes per pixel, ligand balls, stick centre lines.

What a MiSI-Bench picture shows (the benchmark's colour rules, ../shared/docs/misi-bench.md):
oxygen red, nitrogen blue, ligand carbons grey, pocket carbons purple ``#BF99F2`` or orange
``#F2B366`` alternating by residue, other elements in their usual colours; pocket residues
as sticks, the ligand as ball-and-stick; labels (residue names, ligand atom names) drawn on
top in light text; a plain background.

Nothing here depends on one renderer. Every image is calibrated from its own pixels:

* the background colour is the median of the image's border;
* a pixel's colour is reduced to its *chroma*, the point (s·cos h, s·sin h) of its hue h and
  saturation s: depth cueing, fog, shading and antialiasing against a dark background change
  a colour's brightness but hardly its chroma, so one class keeps one chroma from the nearest
  to the farthest atom and across renderers;
* class prototypes start at the benchmark's colours and move to the median chroma of the
  pixels they attract in this image (two rounds, at most :data:`MAX_DRIFT` away), so a
  renderer's lighting that shifts colours a little is absorbed;
* a pixel joins the nearest prototype only when it lies within that prototype's acceptance
  radius (less than half the distance to the next prototype): label text (light yellow,
  light cyan, white), specular highlights and colour mixtures are left *unknown*;
* thin leftovers (label strokes, antialiased seams) are removed from every class by a 3×3
  morphological opening.

Atoms: ligand atoms are balls, several times thicker than the sticks, so they are the
maxima of the distance transform of their class mask (small holes such as highlights and
label strokes filled first) that are clearly wider than the sticks of the same image
(:data:`BALL_FACTOR` × the stick half-width, itself measured as the median half-width along
the centre lines of all class masks). Pocket atoms are stick joints; they are not isolated
here but measured as coloured pixels (their centre lines), which is what registration
matches against (:mod:`misi_agent.tools.registration`).
"""
from __future__ import annotations

import colorsys
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image
from scipy import ndimage
from scipy.spatial import cKDTree

from misi_agent.errors import MisiError
from misi_agent.scene import HEX, hex_to_rgb
from misi_agent.tools.spatial_records import AtomDetection, DetectedAtom

# Colour classes looked for when nothing else is known (the scene's own classes are used when a structure is).
DEFAULT_CLASSES: tuple[str, ...] = ("O", "N", "LIGAND_C", "POCKET_C0", "POCKET_C1", "S", "P", "F", "CL")
POCKET_CLASSES = frozenset({"POCKET_C0", "POCKET_C1"})
ACHROMATIC = frozenset({"LIGAND_C"})  # neutral grey: its prototype stays at the origin of the chroma plane
CLASS_IDS = {name: i for i, name in enumerate(HEX)}  # a fixed number per colour class (for one k-d tree over all classes)
CLASS_SEPARATION = 1.0e5  # px: classes are stacked this far apart in a third coordinate so they never match
OUTPUT_CLASS = {"O": "O", "N": "N", "LIGAND_C": "LIGAND_C", "POCKET_C0": "POCKET_C0", "POCKET_C1": "POCKET_C1"}
MAX_ACCEPT = 0.2  # largest acceptance radius of a class in the chroma plane
ACCEPT_FRACTION = 0.45  # acceptance radius = this × distance to the nearest other prototype
MAX_DRIFT = 0.12  # how far calibration may move a prototype from the benchmark colour
GREY_ACCEPT = 0.1  # ligand carbons are neutral grey: a tight radius and no drift, or light label text (yellowish,
# about 0.2 from grey) would be taken for ligand carbon when labels are many
VALUE_MARGIN = 0.12  # a pixel is foreground when its value exceeds the background's by this much
BORDER = 3  # px of image border used to estimate the background
BALL_FACTOR = 1.6  # a ball is at least this many stick half-widths wide (radius)
MIN_CLASS_PIXELS = 12  # fewer pixels than this do not move a prototype
UNKNOWN, BACKGROUND = -2, -1


class ImageError(MisiError):
    """An image that cannot be read or analysed (one-line message)."""


def as_rgb(image: Any) -> np.ndarray:
    """(H, W, 3) uint8 RGB from a path, a PIL image or an array (RGBA loses its alpha)."""
    if isinstance(image, (str, Path)):
        try:
            with Image.open(image) as im:
                return np.asarray(im.convert("RGB"))
        except FileNotFoundError:
            raise ImageError(f"image not found: {image}") from None
        except OSError as exc:
            raise ImageError(f"cannot read image {image}: {exc}") from None
    if isinstance(image, Image.Image):
        return np.asarray(image.convert("RGB"))
    arr = np.asarray(image)
    if arr.ndim == 3 and arr.shape[2] in (3, 4) and arr.shape[0] >= 8 and arr.shape[1] >= 8:
        arr = arr[..., :3]
        if arr.dtype != np.uint8:
            arr = np.clip(np.rint(arr * (255.0 if arr.max() <= 1.0 else 1.0)), 0, 255).astype(np.uint8)
        return np.ascontiguousarray(arr)
    raise ImageError(f"not an RGB image (array of shape {getattr(arr, 'shape', None)})")


@lru_cache(maxsize=64)
def prototype_chroma(name: str) -> tuple[float, float]:
    """The chroma (s·cos 2πh, s·sin 2πh) of a class's benchmark colour (scene.HEX)."""
    r, g, b = (c / 255.0 for c in hex_to_rgb(HEX[name]))
    h, s, _ = colorsys.rgb_to_hsv(r, g, b)
    return s * np.cos(2 * np.pi * h), s * np.sin(2 * np.pi * h)


def _hsv(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    hsv = np.asarray(Image.fromarray(rgb).convert("HSV"), dtype=np.float32) / 255.0
    return hsv[..., 0], hsv[..., 1], hsv[..., 2]


def estimate_background(rgb: np.ndarray, border: int = BORDER) -> np.ndarray:
    """Median RGB of the outer ``border`` pixels (labels and atoms are kept off the border)."""
    b = max(1, min(border, min(rgb.shape[:2]) // 4))
    ring = np.concatenate([rgb[:b].reshape(-1, 3), rgb[-b:].reshape(-1, 3),
                           rgb[:, :b].reshape(-1, 3), rgb[:, -b:].reshape(-1, 3)])
    return np.median(ring, axis=0)


@dataclass(frozen=True)
class ColourModel:
    """Class prototypes in the chroma plane, calibrated on one image, and the foreground threshold."""

    names: tuple[str, ...]
    chroma: np.ndarray  # (K, 2)
    radius: np.ndarray  # (K,) acceptance radii
    v_min: float  # value (0..1) above which a pixel is foreground
    background: np.ndarray  # (3,) RGB


def acceptance_radii(chroma: np.ndarray, names: Sequence[str] = ()) -> np.ndarray:
    """Per prototype: ACCEPT_FRACTION × distance to the nearest other prototype, at most MAX_ACCEPT
    (GREY_ACCEPT for the neutral grey of ligand carbons)."""
    k = len(chroma)
    if k < 2:
        out = np.full(k, MAX_ACCEPT)
    else:
        d = np.linalg.norm(chroma[:, None] - chroma[None], axis=2)
        d[np.arange(k), np.arange(k)] = np.inf
        out = np.minimum(ACCEPT_FRACTION * d.min(axis=1), MAX_ACCEPT)
    for j, n in enumerate(names):
        if n in ACHROMATIC:
            out[j] = min(out[j], GREY_ACCEPT)
    return out


def _assign(c: np.ndarray, chroma: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """Index of the accepting prototype per chroma point, UNKNOWN where none accepts."""
    c = np.asarray(c, np.float32)
    best = np.full(len(c), np.inf, np.float32)
    k = np.zeros(len(c), np.int8)
    for j, (px, py) in enumerate(np.asarray(chroma, np.float32)):
        d2 = (c[:, 0] - px) ** 2 + (c[:, 1] - py) ** 2
        better = d2 < best
        best[better] = d2[better]
        k[better] = j
    ok = best <= (np.asarray(radius, np.float32) ** 2)[k]
    return np.where(ok, k, np.int8(UNKNOWN)).astype(np.int8)


def _chroma(rgb: np.ndarray, v_min: float) -> tuple[np.ndarray, np.ndarray]:
    """Foreground mask (value above ``v_min``) and the chroma (N, 2) of its pixels."""
    h, s, v = _hsv(rgb)
    fg = v > v_min
    a = 2 * np.pi * h[fg]
    sf = s[fg]
    return fg, np.stack([sf * np.cos(a), sf * np.sin(a)], axis=1)


def background_value(rgb: np.ndarray) -> tuple[np.ndarray, float]:
    """Background RGB (border median) and the value above which a pixel is foreground."""
    bg = estimate_background(rgb)
    _, _, v_bg = colorsys.rgb_to_hsv(*(bg / 255.0))
    return bg, float(v_bg + VALUE_MARGIN)


def calibrate_colours(rgb: np.ndarray, classes: Sequence[str] = DEFAULT_CLASSES, rounds: int = 2,
                      _fg_chroma: tuple[np.ndarray, np.ndarray] | None = None) -> ColourModel:
    """Prototypes for ``classes`` moved to this image's colours (see the module docstring)."""
    names = tuple(dict.fromkeys(classes))
    if not names:
        raise ImageError("no colour classes to look for")
    prior = np.array([prototype_chroma(n) for n in names], float)
    bg, v_min = background_value(rgb)
    _, c = _fg_chroma if _fg_chroma is not None else _chroma(rgb, v_min)
    if len(c) > 40000:  # calibration needs a sample, not every pixel
        c = c[:: len(c) // 40000 + 1]
    chroma = prior.copy()
    for _ in range(rounds):
        radius = acceptance_radii(chroma, names)
        k = _assign(c, chroma, radius)
        for j in range(len(names)):
            pts = c[k == j]
            if len(pts) >= MIN_CLASS_PIXELS and names[j] not in ACHROMATIC:
                m = np.median(pts, axis=0)
                drift = m - prior[j]
                n = np.linalg.norm(drift)
                chroma[j] = prior[j] + (drift if n <= MAX_DRIFT else drift * (MAX_DRIFT / n))
    return ColourModel(names, chroma, acceptance_radii(chroma, names), v_min, bg)


def _neighbourhood(a: np.ndarray, fill, op) -> np.ndarray:
    """3×3 max or min (``op`` = np.maximum / np.minimum) by shifted slices (faster than ndimage filters)."""
    p = np.pad(a, 1, mode="constant", constant_values=fill)
    h, w = a.shape
    out = a.copy()
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            if dy == 1 and dx == 1:
                continue
            op(out, p[dy:dy + h, dx:dx + w], out=out)
    return out


def _same_neighbours(label: np.ndarray) -> np.ndarray:
    """How many of the 8 neighbours carry the same label."""
    p = np.pad(label, 1, mode="constant", constant_values=BACKGROUND)
    h, w = label.shape
    n = np.zeros(label.shape, np.int8)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            if dy == 1 and dx == 1:
                continue
            n += p[dy:dy + h, dx:dx + w] == label
    return n


@dataclass(frozen=True)
class PixelClasses:
    """Per pixel: the index of its colour class in ``names``, BACKGROUND (−1) or UNKNOWN (−2)."""

    names: tuple[str, ...]
    label: np.ndarray  # (H, W) int8
    model: ColourModel

    @property
    def shape(self) -> tuple[int, int]:
        return self.label.shape

    def mask(self, name: str) -> np.ndarray:
        if name not in self.names:
            return np.zeros(self.label.shape, bool)
        return self.label == self.names.index(name)

    def counts(self) -> dict[str, int]:
        return {n: int(np.count_nonzero(self.label == k)) for k, n in enumerate(self.names)}


def classify_pixels(image: Any, classes: Sequence[str] = DEFAULT_CLASSES, model: ColourModel | None = None) -> PixelClasses:
    """Colour class of every pixel, calibrated on the image itself unless ``model`` is given.

    Foreground pixels whose chroma no prototype accepts are UNKNOWN (label text, highlights,
    colour mixtures); so are dark pixels right next to them (the outline drawn around label
    text), and class pixels with fewer than two neighbours of their class (thin strokes).
    """
    rgb = as_rgb(image)
    bg, v_min = background_value(rgb)
    fg, c = _chroma(rgb, model.v_min if model is not None else v_min)
    model = model or calibrate_colours(rgb, classes, _fg_chroma=(fg, c))
    label = np.full(rgb.shape[:2], BACKGROUND, np.int8)
    label[fg] = _assign(c, model.chroma, model.radius)
    thin = (label >= 0) & (_same_neighbours(label) < 2)
    label[thin] = UNKNOWN
    unknown = label == UNKNOWN
    halo = (label == BACKGROUND) & _neighbourhood(unknown, False, np.maximum)
    label[halo] = UNKNOWN
    return PixelClasses(model.names, label, model)


@dataclass(frozen=True)
class ImageAnalysis:
    """What an image shows, ready for matching: classes, distance transform, centre lines, balls.

    ``dt`` is, for every pixel, the distance (px) to the nearest background pixel or boundary
    between two colour classes (unknown pixels such as label text count as neither, so text
    drawn over an atom does not cut it). ``ridge[name]`` holds the centre-line pixels of each
    class as (M, 2) screen points (pixel centres, x right, y down) and ``ridge_width[name]``
    their half-widths. ``halfwidth`` is the median half-width over all centre lines: the
    typical stick half-width of this image.
    """

    pixels: PixelClasses
    dt: np.ndarray
    ridge: dict[str, np.ndarray]
    ridge_width: dict[str, np.ndarray]
    halfwidth: float

    @property
    def names(self) -> tuple[str, ...]:
        return self.pixels.names

    @property
    def width(self) -> int:
        return int(self.dt.shape[1])

    @property
    def height(self) -> int:
        return int(self.dt.shape[0])

    @cached_property
    def trees(self) -> dict[str, cKDTree]:
        """A k-d tree of every class's centre-line points (built on first use)."""
        return {n: cKDTree(p) for n, p in self.ridge.items() if len(p)}

    @cached_property
    def tree3(self) -> cKDTree | None:
        """One k-d tree of all centre-line points as (x, y, class id × CLASS_SEPARATION)."""
        return stacked_tree(self.ridge)


def stack_classes(points: dict[str, np.ndarray]) -> np.ndarray:
    """(M, 3) array of every class's 2D points with the class id (× CLASS_SEPARATION) as a third coordinate."""
    parts = [np.column_stack([p, np.full(len(p), CLASS_IDS[n] * CLASS_SEPARATION)]) for n, p in points.items() if len(p)]
    return np.concatenate(parts) if parts else np.zeros((0, 3))


def stacked_tree(points: dict[str, np.ndarray]) -> cKDTree | None:
    pts = stack_classes(points)
    return cKDTree(pts) if len(pts) else None


def analyse_image(image: Any, classes: Sequence[str] = DEFAULT_CLASSES, model: ColourModel | None = None) -> ImageAnalysis:
    """Classify the pixels, measure the distance transform and extract every class's centre lines."""
    pc = classify_pixels(image, classes, model)
    label = pc.label
    known = label >= 0
    lo = _neighbourhood(np.where(known, label, np.int8(127)), 127, np.minimum)
    hi = _neighbourhood(np.where(known, label, np.int8(-3)), -3, np.maximum)
    boundary = (lo != hi) & (lo != 127) & (hi != -3)  # two different classes meet here
    inside = (label != BACKGROUND) & ~boundary
    dt = ndimage.distance_transform_edt(inside).astype(np.float32)
    peak = (dt >= 1.0) & (dt >= _neighbourhood(dt, 0.0, np.maximum) - 1e-6)
    ridge, width = {}, {}
    for k, n in enumerate(pc.names):
        ys, xs = np.nonzero(peak & (label == k))
        ridge[n] = np.stack([xs + 0.5, ys + 0.5], axis=1).astype(float)
        width[n] = dt[ys, xs].astype(float)
    stick = [width[n] for n in pc.names if n in POCKET_CLASSES and len(width[n])]
    stick_w = np.concatenate(stick) if stick else np.zeros(0)
    if stick_w.size >= 50:  # pocket sticks present: their median half-width
        hw = float(np.median(stick_w))
    else:  # no pocket (e.g. the ligand alone): the thinner quarter of all centre lines (ligand sticks)
        allw = np.concatenate(list(width.values())) if width else np.zeros(0)
        hw = float(np.percentile(allw, 25)) if allw.size else 1.0
    return ImageAnalysis(pc, dt, ridge, width, max(1.0, hw))


RADIUS_OFFSET = 0.5  # px: the distance transform stops half a pixel inside the drawn edge
LOCAL_WINDOW = 12.0  # stick half-widths: how far around a candidate ball the local sticks are measured
LOCAL_FACTOR = 1.3  # a ball is at least this many times as wide as the thicker local sticks (75th percentile)
MIN_LOCAL_RIDGE = 20  # centre-line pixels needed to trust the local stick width
PEAK_MAY_BE_UNKNOWN = False  # a ball's centre must show its class (under label text the shape is lost)
MIN_KNOWN = 0.5  # share of a ball's inner disc that must show its class (the rest may be label text)
ROUND_DIRECTIONS = 16
ROUND_MAX_OPEN = 5  # of the 16 probes, at most this many may stay inside a wide shape
AREA_FACTOR = 4.0  # a ball's class region holds at most this many discs of its radius per ball


def find_balls(an: ImageAnalysis, factor: float | None = None) -> list[DetectedAtom]:
    """Ligand balls: round distance-transform maxima much wider than the image's sticks.

    A candidate is a centre-line pixel of a ball class (not a pocket carbon) or of unknown
    colour (a ball under a label) whose half-width is at least ``factor`` × the stick
    half-width and which is round in two ways: along at most a quarter of 16 directions does
    the shape stay wider than half the radius at 0.9 radii from the centre (a stick continues
    along its axis, a ball ends), and the connected region of its class holds no more than
    :data:`AREA_FACTOR` discs of its radius per ball in it (a stick end with its half-bond is
    long). Overlapping candidates keep the widest; the class is the majority of the known
    class pixels inside the ball.
    """
    label, dt = an.pixels.label, an.dt
    names = an.names
    ball_idx = [k for k, n in enumerate(names) if n not in POCKET_CLASSES]
    if not ball_idx:
        return []
    r_min = max(2.0, (BALL_FACTOR if factor is None else factor) * an.halfwidth)
    cand = (dt >= r_min) & (dt >= _neighbourhood(dt, 0.0, np.maximum) - 1e-6)
    cand &= np.isin(label, ball_idx + ([UNKNOWN] if PEAK_MAY_BE_UNKNOWN else []))
    ys, xs = np.nonzero(cand)
    if not len(ys):
        return []
    h, w = dt.shape
    r = dt[ys, xs].astype(float)
    cx, cy = xs + 0.5, ys + 0.5
    ang = np.linspace(0, 2 * np.pi, ROUND_DIRECTIONS, endpoint=False)
    px = np.clip((cx[:, None] + 0.9 * r[:, None] * np.cos(ang)[None]).astype(int), 0, w - 1)
    py = np.clip((cy[:, None] + 0.9 * r[:, None] * np.sin(ang)[None]).astype(int), 0, h - 1)
    round_ = np.count_nonzero(dt[py, px] > 0.5 * r[:, None], axis=1) <= ROUND_MAX_OPEN
    ys, xs, r, cx, cy = ys[round_], xs[round_], r[round_], cx[round_], cy[round_]
    order = np.argsort(-r, kind="stable")
    pocket_pts = [an.ridge[n] for n in names if n in POCKET_CLASSES and len(an.ridge[n])]
    pocket_w = [an.ridge_width[n] for n in names if n in POCKET_CLASSES and len(an.ridge[n])]
    tree = cKDTree(np.concatenate(pocket_pts)) if pocket_pts else None
    pw = np.concatenate(pocket_w) if pocket_w else np.zeros(0)
    kept: list[tuple[float, float, float, int]] = []
    for i in order:
        x, y, rad = float(cx[i]), float(cy[i]), float(r[i])
        if any((x - a) ** 2 + (y - b) ** 2 < (0.8 * max(rad, q)) ** 2 for a, b, q, _ in kept):
            continue
        if tree is not None:  # sticks near it on screen: the ball must be clearly wider than the thicker of them
            near = tree.query_ball_point([x, y], LOCAL_WINDOW * an.halfwidth)
            if len(near) >= MIN_LOCAL_RIDGE and rad < LOCAL_FACTOR * float(np.percentile(pw[near], 75)):
                continue
        y0, y1 = int(max(0, y - rad)), int(min(h, y + rad + 1))
        x0, x1 = int(max(0, x - rad)), int(min(w, x + rad + 1))
        sub = label[y0:y1, x0:x1]
        yy, xx = np.mgrid[y0:y1, x0:x1]
        disc = (xx + 0.5 - x) ** 2 + (yy + 0.5 - y) ** 2 <= (0.8 * rad) ** 2
        known = sub[disc & (sub >= 0)]
        if known.size == 0:
            continue
        votes = np.bincount(known, minlength=len(names))
        k = int(votes.argmax())
        if names[k] in POCKET_CLASSES or votes[k] < MIN_KNOWN * disc.sum():
            continue
        kept.append((x, y, rad, k))
    if not kept:
        return []
    # area test per class region
    out: list[DetectedAtom] = []
    by_class: dict[int, list[int]] = {}
    for j, (_, _, _, k) in enumerate(kept):
        by_class.setdefault(k, []).append(j)
    for k, members in by_class.items():
        regions, _ = ndimage.label(label == k)
        ids = np.array([regions[int(kept[j][1]), int(kept[j][0])] for j in members])
        for j, rid in zip(members, ids):
            x, y, rad, _ = kept[j]
            if rid > 0:
                peers = [m for m, q in zip(members, ids) if q == rid]
                area = np.count_nonzero(regions == rid)
                budget = sum(np.pi * (kept[m][2] + RADIUS_OFFSET) ** 2 for m in peers)
                if AREA_FACTOR and area > AREA_FACTOR * budget:
                    continue
            out.append(DetectedAtom(x, y, rad + RADIUS_OFFSET, OUTPUT_CLASS.get(names[k], "OTHER"),
                                    (rad + RADIUS_OFFSET) / an.halfwidth))
    out.sort(key=lambda a: (a.y, a.x))
    return out


def class_colors(rgb: np.ndarray, pc: PixelClasses) -> dict[str, tuple[int, int, int]]:
    """Mean RGB of the brightest half of each class's pixels (the class's colour in this image)."""
    out = {}
    for k, n in enumerate(pc.names):
        m = pc.label == k
        if np.count_nonzero(m) < MIN_CLASS_PIXELS:
            continue
        px = rgb[m].astype(float)
        bright = px.max(axis=1)
        sel = px[bright >= np.median(bright)]
        out[n] = tuple(int(round(v)) for v in sel.mean(axis=0))
    return out


def detect_atoms(image: Any, classes: Sequence[str] = DEFAULT_CLASSES) -> AtomDetection:
    """The ligand atoms (balls) an image shows, with their colour classes, plus what else it shows.

    ``image`` is a path, a PIL image or an RGB array. Returns an
    :class:`~misi_agent.tools.spatial_records.AtomDetection`: ball centres and radii in pixels,
    each with its class (O, N, LIGAND_C or OTHER), the pixel count of every colour class
    (pocket sticks: POCKET_C0 purple, POCKET_C1 orange), the calibrated class colours, the
    stick half-width and the background. Labels drawn over atoms are ignored; balls hidden
    behind other atoms are not reported.
    """
    rgb = as_rgb(image)
    an = analyse_image(rgb, classes)
    balls = find_balls(an)
    notes = []
    counts = an.pixels.counts()
    if sum(counts.values()) == 0:
        notes.append("no coloured atom pixels found (empty or unexpected image)")
    return AtomDetection(rgb.shape[1], rgb.shape[0], tuple(balls), counts, class_colors(rgb, an.pixels), an.halfwidth,
                         tuple(int(round(v)) for v in an.pixels.model.background), tuple(notes))
