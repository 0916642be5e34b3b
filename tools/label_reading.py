"""Read the text labels of a MiSI-Bench picture: ``ARG 45`` at every residue, ``O1B`` at every ligand atom.

Why a home-made recogniser rather than Tesseract: the label vocabulary is tiny (capital
letters, digits, the prime ``'``), the text is 8–18 px high on a cluttered background, and
Tesseract is a system package the project would have to install in CI and in the README's
set-up. A glyph classifier trained on label text rendered by this module in several fonts
and sizes (Pillow's bundled Aileron and matplotlib's DejaVu / STIX families, all shipped with
pinned Python packages) reads both renderers' labels; its measured accuracy per renderer is
in ``eval/results/image_hbonds_{raster,pymol}.md`` (``eval/image_hbonds.py``).

Pipeline, calibrated on every image (no renderer constant is used):

1. **Text colours.** Label text is light and of a colour no atom class explains. Pixels the
   calibrated atom colour model (:func:`misi_agent.tools.atom_detection.classify_pixels`)
   leaves *unknown* and that are bright are histogrammed in the chroma plane; the peaks are
   candidate text colours. A peak is kept when its connected components look like text:
   glyph-sized and ringed by dark pixels (the outline/halo drawn around label text). Text too
   small to reach its colour (8 px: strokes under a pixel wide) is looked for among dimmer
   pixels too, and such a colour is kept only where its reads look like labels
   (:func:`dim_text_colours`, :func:`looks_like_labels`).
2. **Glyphs.** Connected components of one text colour, merged into words (same line,
   small gaps) and labels (a space-sized gap: ``ARG`` + ``45``).
3. **Recognition.** Each glyph crop becomes a 16×16 grey patch plus its aspect ratio and its
   height and vertical position relative to the word; a small two-layer network
   (:data:`MODEL_PATH`, numpy inference; trained by :func:`train_glyph_model`) gives
   probabilities over :data:`ALPHABET`. Components too wide for one glyph (touching letters)
   are split at the column that the network reads best. The network has no ``-``: a minus sign
   (negative residue numbers, e.g. an N-terminal tag) is a flat bar at mid-height just left of
   a word's first glyph, found by its shape (:data:`MINUS_ALPHA`).
4. **Kinds.** Which text colour is residue labels and which ligand atom names is decided by
   the words: residue labels are three letters, a space and a number.

The result keeps every glyph's probabilities so that :mod:`misi_agent.tools.identity` can
decode names under chemical constraints (an atom name starts with its element; a residue
name is one the heavy-atom graph allows).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont
from scipy import ndimage

from misi_agent.knowledge import STANDARD_RESIDUES
from misi_agent.tools.atom_detection import UNKNOWN, as_rgb, classify_pixels

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'"
LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
DIGITS = frozenset("0123456789")
PATCH = 16  # glyph patch side (px)
N_EXTRA = 4  # aspect, relative height, relative top, relative bottom
MODEL_PATH = Path(__file__).resolve().parent.parent / "knowledge" / "glyph_model.npz"
CHROMA_RADIUS = 0.11  # chroma-plane radius of a text colour's histogram peak
ALPHA_MIN = 0.4  # a text pixel is the text colour times at least this ...
RESIDUAL_MAX = 0.1  # ... up to this relative colour residual
PEAK_MIN_PIXELS = 15  # a text colour needs at least this many bright pixels in the image
MIN_GLYPH_H, MAX_GLYPH_H = 5, 40  # px
RING_DARK = 0.45  # share of a component's 1-px ring that must be dark for it to be text
BASELINE_TOL = 1  # px: glyphs of one label share their baseline (or cap line) to within this
MAX_ATOM_NAME = 4  # PDB atom names have at most four characters: longer words are overlapping labels
MINUS_ALPHA = 0.5  # a minus sign's bar is text at least this strong somewhere (faint bars: edges of sticks, labels).
# Measured on 40 T9 items, front and back: true minus signs 0.60-0.81 (raster), 0.60-0.78 (PyMOL); PyMOL's stray bars 0.42-0.59
MIN_GLYPH_CONFIDENCE = 0.3  # a ligand word with a less certain glyph is a highlight or a stick fragment
RESIDUE_RUN_SHARE = 0.2  # residue runs per ligand-like word under which the most ligand-like colour is the ligand's
DIM_LEVELS = (0.7, 0.55, 0.45)  # value levels at which dim_text_colours looks for text too small to reach its colour
DIM_MIN_MULTI, DIM_MIN_CONFIDENCE = 3, 0.9  # a dim colour's reads must look like labels (looks_like_labels)


class LabelReadingError(ValueError):
    """The glyph model is missing or unreadable."""


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Glyph:
    """One recognised character: its box (x0, y0, x1, y1, exclusive ends) and probabilities over ALPHABET."""

    box: tuple[int, int, int, int]
    probs: np.ndarray
    fixed: str | None = None  # a character found by its shape, not by the network (the minus sign)

    @property
    def char(self) -> str:
        return self.fixed if self.fixed else ALPHABET[int(np.argmax(self.probs))]

    @property
    def confidence(self) -> float:
        return 1.0 if self.fixed else float(np.max(self.probs))


@dataclass(frozen=True)
class LabelRead:
    """One label as read: ``words`` (space-separated groups of glyphs), its box and its colour group.

    ``kind`` is ``residue``, ``ligand`` or ``unknown``; ``text`` is the best reading without
    constraints (glyph arg-max, words joined by a space).
    """

    words: tuple[tuple[Glyph, ...], ...]
    box: tuple[int, int, int, int]
    colour: int
    kind: str = "unknown"
    reading: str | None = None  # the reading under the kind's constraints (digits in numbers, ...)
    at: tuple[float, float] | None = None  # the sub-pixel centre where the text was located more finely than its
    # box (:func:`misi_agent.tools.label_spotting.with_refined_residue_centres`); else the box's centre is used

    @property
    def glyphs(self) -> tuple[Glyph, ...]:
        return tuple(g for w in self.words for g in w)

    @property
    def raw_text(self) -> str:
        """Glyph arg-max, words joined by a space."""
        return " ".join("".join(g.char for g in w) for w in self.words)

    @property
    def text(self) -> str:
        """The constrained reading when there is one, else the raw text."""
        return self.reading if self.reading is not None else self.raw_text

    @property
    def confidence(self) -> float:
        gs = self.glyphs
        return float(np.prod([g.confidence for g in gs])) if gs else 0.0

    @property
    def centre(self) -> tuple[float, float]:
        if self.at is not None:
            return self.at
        x0, y0, x1, y1 = self.box
        return (x0 + x1) / 2.0, (y0 + y1) / 2.0

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "kind": self.kind, "box": list(self.box), "confidence": round(self.confidence, 3)}


@dataclass(frozen=True)
class ImageLabels:
    """Every label read in one picture, with the text colours found (chroma points)."""

    labels: tuple[LabelRead, ...]
    colours: tuple[tuple[float, float], ...] = field(default=())

    def of_kind(self, kind: str) -> list[LabelRead]:
        return [lab for lab in self.labels if lab.kind == kind]


# ----------------------------------------------------------------------------- glyph model


@lru_cache(maxsize=2)
def load_glyph_model(path: str | None = None) -> dict[str, np.ndarray]:
    p = Path(path) if path else MODEL_PATH
    try:
        with np.load(p, allow_pickle=False) as data:
            model = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise LabelReadingError(f"glyph model {p} unreadable ({exc}); run python -m misi_agent.tools.label_reading --train") from None
    if str(model.get("alphabet", "")) != ALPHABET:
        raise LabelReadingError(f"glyph model {p} was trained for another alphabet")
    return model


def glyph_probs(features: np.ndarray, model: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """(n, len(ALPHABET)) probabilities of the two-layer network for (n, PATCH²+N_EXTRA) features."""
    m = model or load_glyph_model()
    x = (np.asarray(features, np.float32) - m["mean"]) / m["std"]
    h = np.maximum(x @ m["w1"] + m["b1"], 0.0)
    h = np.maximum(h @ m["w2"] + m["b2"], 0.0)
    z = h @ m["w3"] + m["b3"]
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def glyph_features(patch: np.ndarray, top: float, bottom: float, line_top: float, line_bottom: float) -> np.ndarray:
    """Features of one glyph: its grey crop (0..1) scaled into PATCH×PATCH keeping the aspect ratio,
    the aspect ratio, and its height/top/bottom relative to the word's line."""
    h, w = patch.shape
    s = (PATCH - 2) / max(h, w)
    nh, nw = max(1, int(round(h * s))), max(1, int(round(w * s)))
    im = Image.fromarray(np.clip(patch * 255, 0, 255).astype(np.uint8)).resize((nw, nh), Image.BILINEAR)
    out = np.zeros((PATCH, PATCH), np.float32)
    y0, x0 = (PATCH - nh) // 2, (PATCH - nw) // 2
    out[y0:y0 + nh, x0:x0 + nw] = np.asarray(im, np.float32) / 255.0
    lh = max(1.0, line_bottom - line_top)
    extra = np.array([w / max(h, 1), h / lh, (top - line_top) / lh, (line_bottom - bottom) / lh], np.float32)
    return np.concatenate([out.ravel(), extra])


# ----------------------------------------------------------------------------- text pixels


def _hsv(rgb: np.ndarray) -> np.ndarray:
    return np.asarray(Image.fromarray(rgb).convert("HSV"), np.float32) / 255.0


def _chroma_of(hsv: np.ndarray) -> np.ndarray:
    a = 2 * np.pi * hsv[..., 0]
    return np.stack([hsv[..., 1] * np.cos(a), hsv[..., 1] * np.sin(a)], axis=-1)


def _chroma_peaks(c: np.ndarray) -> list[np.ndarray]:
    """Up to four peaks of the chroma histogram of the points ``c``, each the median of the points within
    CHROMA_RADIUS of it (peaks of fewer than PEAK_MIN_PIXELS points are skipped)."""
    bins = np.linspace(-1, 1, 51)  # 0.04-wide bins
    hist, _, _ = np.histogram2d(c[:, 0], c[:, 1], bins=[bins, bins])
    hist = ndimage.uniform_filter(hist, 3) * 9
    peaks = []
    work = hist.copy()
    for _ in range(4):
        i, j = np.unravel_index(int(np.argmax(work)), work.shape)
        if work[i, j] < PEAK_MIN_PIXELS:
            break
        centre = np.array([(bins[i] + bins[i + 1]) / 2, (bins[j] + bins[j + 1]) / 2])
        near = np.linalg.norm(c - centre, axis=1) <= CHROMA_RADIUS
        if near.sum() >= PEAK_MIN_PIXELS:
            peaks.append(np.median(c[near], axis=0))
        work[max(0, i - 4):i + 5, max(0, j - 4):j + 5] = 0  # suppress 0.16 around the peak
    return peaks


def text_colours(rgb: np.ndarray, hsv: np.ndarray, unknown: np.ndarray) -> list[np.ndarray]:
    """Chroma points of candidate text colours: peaks of the chroma histogram of bright unknown pixels."""
    bright = unknown & (hsv[..., 2] >= 0.85)
    if bright.sum() < 4 * PEAK_MIN_PIXELS:  # little text (a crop, thin strokes): dimmer pixels count too
        bright = unknown & (hsv[..., 2] >= 0.7)
    if bright.sum() < PEAK_MIN_PIXELS:
        return []
    return _chroma_peaks(_chroma_of(hsv)[bright])


def dim_text_colours(chroma: np.ndarray, v: np.ndarray, unknown: np.ndarray, found: Sequence[np.ndarray]
                     ) -> list[np.ndarray]:
    """Further candidate text colours among dimmer unknown pixels (value ≥ 0.7, 0.55, 0.45), away from ``found``.

    Small text never reaches its colour: at 8 px a glyph's strokes are under a pixel wide, and their pixels
    are the text colour times 0.5-0.8 (the raster renderer's light-cyan names at 384 px peak at 0.56). Such
    a colour is only a candidate: :func:`read_labels` keeps it when what it reads looks like labels. ``chroma``,
    ``v``: the picture's chroma points and values (:func:`_chroma_of`)."""
    out: list[np.ndarray] = []
    for level in DIM_LEVELS:
        sel = unknown & (v >= level)
        if sel.sum() < PEAK_MIN_PIXELS:
            continue
        for p in _chroma_peaks(chroma[sel]):
            if all(np.linalg.norm(p - q) > 2 * CHROMA_RADIUS for q in [*found, *out]):
                out.append(p)
    return out


def text_mask(pix: np.ndarray, colour: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixels that are the text colour scaled toward black (antialiasing over a dark background):
    colour ≈ α·T with α ≥ ALPHA_MIN and a small residual. Returns (α, mask)."""
    T = np.asarray(colour, np.float32)
    tt = float(T @ T)
    alpha = (pix @ T) / tt
    res = np.linalg.norm(pix - alpha[..., None] * T, axis=-1) / math.sqrt(tt)
    return alpha, (alpha >= ALPHA_MIN) & (res <= RESIDUAL_MAX)


def text_rgb(pix: np.ndarray, chroma: np.ndarray, v: np.ndarray, colour: np.ndarray, dim: bool = False
             ) -> tuple[np.ndarray, bool] | None:
    """The RGB of the text of one chroma point (:func:`text_colours`) and whether it is dim: the median of the
    bright pixels (value ≥ 0.85) of that chroma; where none is that bright and ``dim`` is allowed, the median of
    its brightest pixels (within 0.9 of their 98th percentile of value, at least 0.45: small text,
    :func:`dim_text_colours`). None when neither gives one."""
    near = np.linalg.norm(chroma - np.asarray(colour, np.float32), axis=-1) <= 0.08
    sel = near & (v >= 0.85)
    if sel.any():
        return np.median(pix[sel], axis=0), False
    vv = v[near & (v >= DIM_LEVELS[-1])] if dim else np.zeros(0)
    if vv.size < PEAK_MIN_PIXELS:
        return None
    sel = near & (v >= max(DIM_LEVELS[-1], 0.9 * float(np.quantile(vv, 0.98))))
    return np.median(pix[sel], axis=0), True


def colour_alpha(pix: np.ndarray, chroma: np.ndarray, v: np.ndarray, colour: np.ndarray, dim: bool = False
                 ) -> tuple[np.ndarray, np.ndarray] | None:
    """(α, mask) of the text of one chroma point: its RGB (:func:`text_rgb`, dim text allowed with ``dim``)
    found by :func:`text_mask` scaled toward black. None when :func:`text_rgb` gives no RGB."""
    found = text_rgb(pix, chroma, v, colour, dim)
    return None if found is None else text_mask(pix, found[0])


def text_alpha(image: Any, colour: Sequence[float]) -> tuple[np.ndarray, np.ndarray] | None:
    """(α, mask) of the text drawn in ``colour`` (a chroma point of :attr:`ImageLabels.colours`) in ``image``."""
    rgb = as_rgb(image)
    hsv = _hsv(rgb)
    return colour_alpha(rgb.astype(np.float32), _chroma_of(hsv), hsv[..., 2], np.asarray(colour, np.float32), dim=True)


def _dark_ring_share(v: np.ndarray, comp: np.ndarray, box: tuple[slice, slice], v_dark: float) -> float:
    sy, sx = box
    y0, y1 = max(0, sy.start - 1), min(v.shape[0], sy.stop + 1)
    x0, x1 = max(0, sx.start - 1), min(v.shape[1], sx.stop + 1)
    m = comp[y0:y1, x0:x1]
    ring = ndimage.binary_dilation(m) & ~m
    if not ring.any():
        return 0.0
    return float(np.mean(v[y0:y1, x0:x1][ring] <= v_dark))


# ----------------------------------------------------------------------------- grouping


@dataclass
class _Comp:
    x0: int
    y0: int
    x1: int
    y1: int
    patch: np.ndarray  # grey values inside the box, zero outside the component
    minus: bool = False  # a flat bar just left of a number's first digit: read as "-"


def _components(mask: np.ndarray, grey: np.ndarray, v: np.ndarray, v_dark: float) -> list[_Comp]:
    lab, n = ndimage.label(mask, structure=np.ones((3, 3), bool))
    out = []
    for k, sl in enumerate(ndimage.find_objects(lab), start=1):
        if sl is None:
            continue
        h, w = sl[0].stop - sl[0].start, sl[1].stop - sl[1].start
        if h > MAX_GLYPH_H or w > 4 * MAX_GLYPH_H or (h < 2 and w <= h + 1):
            continue
        comp = lab == k
        if h >= MIN_GLYPH_H and _dark_ring_share(v, comp, sl, v_dark) < RING_DARK:
            continue
        patch = np.where(comp[sl], grey[sl], 0.0)
        out.append(_Comp(sl[1].start, sl[0].start, sl[1].stop, sl[0].stop, patch))
    return out


def _consistent_heights(comps: list[_Comp]) -> list[_Comp]:
    """Labels of one colour share one font size: drop glyph-sized components far from the median height
    (ball highlights, stick fragments); small ones (primes) stay for attachment."""
    hs = np.array([c.y1 - c.y0 for c in comps if c.y1 - c.y0 >= MIN_GLYPH_H], float)
    if hs.size < 3:
        return comps
    med = float(np.median(hs))
    return [c for c in comps if c.y1 - c.y0 < MIN_GLYPH_H or abs((c.y1 - c.y0) - med) <= 0.25 * med + 1]


def _group_words(comps: list[_Comp]) -> list[list[list[_Comp]]]:
    """Components -> labels (lists of words, each a list of components left to right).

    Small components (a prime) attach to the nearest glyph on their line. Glyphs on one line
    join a word when the gap is under 0.45 line heights and a label when under 1.1.
    """
    big = [c for c in comps if c.y1 - c.y0 >= MIN_GLYPH_H]
    small = [c for c in comps if c.y1 - c.y0 < MIN_GLYPH_H and c.x1 - c.x0 <= c.y1 - c.y0 + 1]
    bars = [c for c in comps if c.y1 - c.y0 < MIN_GLYPH_H and c.x1 - c.x0 > c.y1 - c.y0 + 1]
    if not big:
        return []
    heights = np.array([c.y1 - c.y0 for c in big], float)
    line_h = float(np.median(heights))
    big.sort(key=lambda c: (c.x0, c.y0))
    # union-find over pairs on one line and close in x
    parent = list(range(len(big)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    gaps: dict[tuple[int, int], float] = {}
    for i, a in enumerate(big):
        for j in range(i + 1, len(big)):
            b = big[j]
            if b.x0 - a.x1 > 1.7 * line_h:
                break
            ov = min(a.y1, b.y1) - max(a.y0, b.y0)
            hh = min(a.y1 - a.y0, b.y1 - b.y0)
            if ov < 0.6 * hh or abs((a.y1 - a.y0) - (b.y1 - b.y0)) > 0.35 * max(a.y1 - a.y0, b.y1 - b.y0):
                continue
            if abs(a.y1 - b.y1) > BASELINE_TOL and abs(a.y0 - b.y0) > BASELINE_TOL:
                continue  # one label's glyphs share a baseline or a top: this is an overlapping neighbour
            gap = b.x0 - a.x1
            if -1 <= gap <= 1.6 * line_h:
                ra, rb = find(i), find(j)
                if ra != rb:
                    parent[rb] = ra
                gaps[(i, j)] = gap
    groups: dict[int, list[int]] = {}
    for i in range(len(big)):
        groups.setdefault(find(i), []).append(i)
    runs = []
    for members in groups.values():
        members.sort(key=lambda i: big[i].x0)
        runs.append([big[i] for i in members])
    inner = [b.x0 - a.x1 for cs in runs for a, b in zip(cs, cs[1:])]
    g_med = float(np.median(inner)) if inner else 1.0
    labels = []
    for cs in runs:
        hh = float(np.median([c.y1 - c.y0 for c in cs]))
        words, cur = [], [cs[0]]
        for a, b in zip(cs, cs[1:]):
            if b.x0 - a.x1 > g_med + max(2.0, 0.3 * hh):  # a space: clearly wider than the usual letter gap
                words.append(cur)
                cur = [b]
            else:
                cur.append(b)
        words.append(cur)
        labels.append(words)
    for s in small:  # primes: attach to the glyph whose top-right corner is closest
        best, bd = None, 1e9
        for words in labels:
            for w in words:
                for c in w:
                    hh = c.y1 - c.y0
                    if s.y1 <= c.y0 + 0.6 * hh and -1 <= s.x0 - c.x1 <= 0.5 * hh and s.y0 >= c.y0 - 0.3 * hh:
                        d = abs(s.x0 - c.x1) + abs(s.y0 - c.y0)
                        if d < bd:
                            best, bd = (w, c), d
        if best is not None:
            w, c = best
            w.insert(w.index(c) + 1, s)
    for b in bars:
        w = next((w for words in labels for w in words if _is_minus_of(b, w[0])), None)
        if w is not None:
            w.insert(0, replace(b, minus=True))
    return labels


def _is_minus_of(bar: _Comp, first: _Comp) -> bool:
    """Is ``bar`` the minus sign of the word starting with glyph ``first``: at mid-height, a letter gap to its left
    (a fragment of a hidden glyph touches its neighbour), narrower and much flatter than a glyph, and text at least
    :data:`MINUS_ALPHA` strong somewhere?"""
    if first.minus:
        return False
    hh = first.y1 - first.y0
    mid = 0.5 * (bar.y0 + bar.y1) - first.y0
    return (float(bar.patch.max()) >= MINUS_ALPHA and 1 <= first.x0 - bar.x1 <= 0.4 * hh
            and 0.35 * hh <= mid <= 0.7 * hh and bar.x1 - bar.x0 <= 0.9 * hh and bar.y1 - bar.y0 <= 0.3 * hh)


# ----------------------------------------------------------------------------- recognition


def _read_word(word: list[_Comp], model: dict[str, np.ndarray]) -> list[Glyph]:
    top = min(c.y0 for c in word)
    bottom = max(c.y1 for c in word)
    big_h = [c.y1 - c.y0 for c in word if c.y1 - c.y0 >= MIN_GLYPH_H]
    line_h = max(big_h) if big_h else bottom - top
    out: list[Glyph] = []
    for c in word:
        if c.minus:
            out.append(Glyph((c.x0, c.y0, c.x1, c.y1), np.zeros(len(ALPHABET)), fixed="-"))
            continue
        out.extend(_read_comp(c, top, top + line_h, model))
    return out


def _probs_of(patch: np.ndarray, y0: int, y1: int, top: float, bottom: float, model) -> np.ndarray:
    return glyph_probs(glyph_features(patch, y0, y1, top, bottom)[None], model)[0]


def _read_comp(c: _Comp, top: float, bottom: float, model, depth: int = 0) -> list[Glyph]:
    """One component as one glyph, or, when it is wide, as two (or more) touching glyphs if that reads better."""
    h, w = c.patch.shape
    p = _probs_of(c.patch, c.y0, c.y1, top, bottom, model)
    whole = [Glyph((c.x0, c.y0, c.x1, c.y1), p)]
    if depth >= 3 or w < 1.25 * h:
        return whole
    col = c.patch.sum(axis=0)
    best_score, best = float(np.log(p.max() + 1e-9)) - 0.5 * max(0.0, w / h - 1.0) * 4, None
    for cut in range(max(2, int(0.3 * h)), w - max(2, int(0.3 * h)) + 1):
        if col[cut - 1: cut + 1].min() > 0.6 * col.max():
            continue
        left = _trim(_Comp(c.x0, c.y0, c.x0 + cut, c.y1, c.patch[:, :cut]))
        right = _trim(_Comp(c.x0 + cut, c.y0, c.x1, c.y1, c.patch[:, cut:]))
        if left is None or right is None:
            continue
        pl = _probs_of(left.patch, left.y0, left.y1, top, bottom, model)
        pr = _probs_of(right.patch, right.y0, right.y1, top, bottom, model)
        score = float(np.log(pl.max() + 1e-9) + np.log(pr.max() + 1e-9)) / 2
        if score > best_score:
            best_score, best = score, (left, right)
    if best is None:
        return whole
    return _read_comp(best[0], top, bottom, model, depth + 1) + _read_comp(best[1], top, bottom, model, depth + 1)


def _trim(c: _Comp) -> _Comp | None:
    rows = np.flatnonzero(c.patch.max(axis=1) > 0)
    cols = np.flatnonzero(c.patch.max(axis=0) > 0)
    if rows.size == 0 or cols.size == 0:
        return None
    r0, r1, k0, k1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    return _Comp(c.x0 + k0, c.y0 + r0, c.x0 + k1, c.y0 + r1, c.patch[r0:r1, k0:k1])


def read_labels(image: Any, model: dict[str, np.ndarray] | None = None) -> ImageLabels:
    """Every label in ``image`` (path, PIL image or array), read and sorted into residue/ligand kinds."""
    model = model or load_glyph_model()
    rgb = as_rgb(image)
    hsv = _hsv(rgb)
    pc = classify_pixels(rgb)
    v = hsv[..., 2]
    v_bg = float(np.median(np.concatenate([v[:3].ravel(), v[-3:].ravel(), v[:, :3].ravel(), v[:, -3:].ravel()])))
    v_dark = v_bg + 0.3
    unknown = pc.label == UNKNOWN
    chroma = _chroma_of(hsv)
    reads: list[LabelRead] = []
    not_atom = lambda c: np.linalg.norm(pc.model.chroma - c, axis=1).min() > 0.12  # noqa: E731
    bright = [c for c in text_colours(rgb, hsv, unknown) if not_atom(c)]
    candidates = bright + [c for c in dim_text_colours(chroma, v, unknown, bright) if not_atom(c)]
    pix = rgb.astype(np.float32)
    colours: list[np.ndarray] = []
    for k, col in enumerate(candidates):
        found = text_rgb(pix, chroma, v, col, dim=True)
        if found is None:
            continue
        dim = k >= len(bright) or found[1]  # found among dim pixels, or without a bright pixel: must look like labels
        alpha, mask = text_mask(pix, found[0])
        comps = _consistent_heights(_components(mask, np.where(mask, np.clip(alpha, 0, 1), 0.0), v, v_dark))
        mine = []
        for words in _group_words(comps):
            glyph_words = tuple(tuple(_read_word(w, model)) for w in words)
            allc = [c for w in words for c in w]
            box = (min(c.x0 for c in allc), min(c.y0 for c in allc), max(c.x1 for c in allc), max(c.y1 for c in allc))
            mine.append(LabelRead(glyph_words, box, len(colours)))
        if dim and not looks_like_labels(mine):
            continue
        colours.append(col)
        reads.extend(mine)
    return ImageLabels(tuple(_assign_kinds(reads, len(colours))), tuple(tuple(map(float, c)) for c in colours))


def looks_like_labels(reads: Sequence[LabelRead]) -> bool:
    """Whether the reads of a dim colour are text rather than shading: at least DIM_MIN_MULTI reads of two or
    more glyphs, half of all reads so, and a median glyph confidence of DIM_MIN_CONFIDENCE.

    Set on 45 pictures of 512 px (both renderers) and 384 px (PyMOL), where every dim candidate (57) is shading
    (1-37 reads, 0-11 of them of 2+ glyphs, median confidence 0.61-0.98) and is refused, so their reading is
    unchanged, against the 8-px atom names of the raster renderer at 384 px (37-39 reads, 35-37 of 2+ glyphs,
    median confidence 0.99-1.0)."""
    glyphs = [[g for w in r.words for g in w] for r in reads]
    glyphs = [gs for gs in glyphs if gs]
    if not glyphs:
        return False
    multi = sum(len(gs) >= 2 for gs in glyphs)
    return multi >= DIM_MIN_MULTI and multi >= 0.5 * len(glyphs) and median_confidence(reads) >= DIM_MIN_CONFIDENCE


def median_confidence(reads: Sequence[LabelRead]) -> float:
    """The median confidence of all glyphs of ``reads`` (0 when they hold none): text reads near 1, shading and stick
    highlights read as glyphs well below."""
    conf = [g.confidence for r in reads for g in r.glyphs]
    return float(np.median(conf)) if conf else 0.0


def _class_string(glyphs: Sequence[Glyph]) -> str:
    """Per glyph ``L`` (surely a letter), ``D`` (surely a digit), ``X`` (could be either: O/0, I/1, S/5), ``'``
    or ``-`` (a minus sign, found by its shape)."""
    letters = np.array([ch in LETTERS for ch in ALPHABET])
    digits = np.array([ch in DIGITS for ch in ALPHABET])
    out = []
    for g in glyphs:
        if g.fixed:
            out.append(g.fixed)
            continue
        pl, pd = float(g.probs[letters].sum()), float(g.probs[digits].sum())
        out.append("'" if g.char == "'" else ("L" if pl >= 0.85 else "D" if pd >= 0.85 else "X"))
    return "".join(out)


_RUN_RE = re.compile(r"[LX]{3}-?[DX]{1,4}(?![DX])")


def _residue_runs(label: LabelRead) -> list[LabelRead]:
    """``XXX 123`` pieces of a residue-coloured label (two touching residue labels become two)."""
    gs = list(label.glyphs)
    cls = _class_string(gs)
    out = []
    for m in _RUN_RE.finditer(cls):
        name, number = _without_fragments(tuple(gs[m.start():m.start() + 3]), tuple(gs[m.start() + 3:m.end()]))
        allg = name + number
        box = (min(g.box[0] for g in allg), min(g.box[1] for g in allg), max(g.box[2] for g in allg),
               max(g.box[3] for g in allg))
        lab = LabelRead((name, number), box, label.colour, "residue")
        rr = residue_reading(lab)
        out.append(LabelRead((name, number), box, label.colour, "residue", f"{rr[0]} {rr[1]}" if rr else None))
    return out


def _is_fragment(g: Glyph) -> bool:
    """A glyph read from a component under :data:`MIN_GLYPH_H` that is not a minus sign: what
    :func:`_group_words` attaches as a prime."""
    return not g.fixed and g.box[3] - g.box[1] < MIN_GLYPH_H


def _without_fragments(name: tuple[Glyph, ...], number: tuple[Glyph, ...]
                       ) -> tuple[tuple[Glyph, ...], tuple[Glyph, ...]]:
    """A residue label's name and number glyphs without the fragments after its first glyph.

    Residue labels hold no primes, so a small component attached after a glyph is a piece of a glyph that a stick or
    another label cut in two (PyMOL's ``ASP 270`` read ``ASH 9270``, the bowl of its P read as a 9) or the stub of a
    hidden one. The first glyph stays (a name's first letter mostly hidden is still read into a standard name), and
    so does the whole run when a fragment stands inside the name or makes up the whole number. Measured on the six
    views of 88 T9 items (true residues read only to measure), the residue reads that name a residue of the item:
    7360 → 7527 of 8289 raster (20 items of the test split), 9126 → 9352 of 10131 and 8494 → 8703 of 9472 raster (two
    sets of 24 of the training split), 1746 → 1821 of 2885 PyMOL (20 of the test split)."""
    kept_name = name[:1] + tuple(g for g in name[1:] if not _is_fragment(g))
    kept_number = tuple(g for g in number if not _is_fragment(g))
    if len(kept_name) != 3 or not kept_number:
        return name, number
    return kept_name, kept_number


def _ligand_words(label: LabelRead) -> list[LabelRead]:
    """Each word of a ligand-coloured label is one atom name; unsure blobs (ball highlights) are dropped."""
    out = []
    for w in label.words:
        w = tuple(g for g in w if not g.fixed)  # atom names hold no minus sign
        w = w[:1] + tuple(g for g in w[1:] if g.char == "'" or not _is_fragment(g))  # a small piece read as no prime
        if not w or len(w) > MAX_ATOM_NAME or min(g.confidence for g in w) < MIN_GLYPH_CONFIDENCE:
            continue
        box = (min(g.box[0] for g in w), min(g.box[1] for g in w), max(g.box[2] for g in w), max(g.box[3] for g in w))
        out.append(LabelRead((w,), box, label.colour, "ligand", atom_name_reading(w)[0]))
    return out


def _whole_residue_label(r: LabelRead) -> bool:
    """Whether a read is one residue label and nothing else: three letters, then a number (``ARG 45``, ``GLY -3``)."""
    if len(r.words) != 2 or len(r.words[0]) != 3 or not 1 <= len(r.words[1]) <= 5:
        return False
    return all(g.char in LETTERS for g in r.words[0]) and \
        all(g.char in DIGITS or (k == 0 and g.char == "-") for k, g in enumerate(r.words[1]))


def _assign_kinds(reads: list[LabelRead], n_colours: int) -> list[LabelRead]:
    """The colour with the most labels reading as three letters and a number holds residue labels (but not the colour
    with the most short words starting with a letter where those outnumber its residue runs :data:`RESIDUE_RUN_SHARE`
    to one and none of its labels reads whole, as ``ARG 45``);
    of the others, the one with the most short words starting with a letter holds ligand atom
    names, among those whose glyphs read surely (median confidence :data:`DIM_MIN_CONFIDENCE`) where any does;
    further colours (highlights, stray pixels) are dropped.

    Why the exception: where the one residue label of a residue–ligand picture is hidden or read among highlight
    fragments, a ligand of 20-60 names yields a run or two by chance among its merged words, and the ligand's colour
    was taken for the residue labels and every ligand name in that view dropped (raster 4cum, a heme: 5 of 6 views;
    31 of the 120 pictures of 20 held-out PyMOL residue–ligand items). The residue colour of a whole pocket holds at
    least 0.37 runs per such word (about 2,550 pictures: held-out items of both renderers, PyMOL T9 and T4 test
    items), a ligand colour's chance runs 0.02-0.08. Fresh runs of every T4 item with a changed picture: held-out
    raster 75 -> 80 (4cum), no answer of 33 test items moved (``eval/results/image_heldout.md``).

    Why the confidence: in PyMOL pictures of 768 px the sticks are wide enough for their highlights to pass as text
    colours, and their fragments outnumber a small ligand's names (6t88: 143 and 44 'words' against 6, median glyph
    confidence 0.79–0.86 against 1.0), which made every ligand name a stick fragment."""
    stats = []
    for ci in range(n_colours):
        mine = [r for r in reads if r.colour == ci and r.glyphs]
        cls = [_class_string(r.glyphs) for r in mine]
        res = sum(1 for r in mine for _ in _residue_runs(r))
        lig = sum(1 for r, c in zip(mine, cls) if len(r.words) == 1 and 1 <= len(c) <= 5 and c[0] in "LX")
        stats.append((ci, mine, res, lig, median_confidence(mine), sum(_whole_residue_label(r) for r in mine)))
    out = []
    most_ligand = max(stats, key=lambda t: t[3], default=None)
    ligand_like = {most_ligand[0]} if most_ligand is not None and most_ligand[5] == 0 and \
        most_ligand[2] < RESIDUE_RUN_SHARE * most_ligand[3] else set()
    res_colour = max([t for t in stats if t[0] not in ligand_like], key=lambda t: t[2], default=None)
    if res_colour is not None and res_colour[2] >= 1:
        for r in res_colour[1]:
            out.extend(_residue_runs(r))
    rest = [t for t in stats if res_colour is None or res_colour[2] < 1 or t[0] != res_colour[0]]
    sure = [t for t in rest if t[4] >= DIM_MIN_CONFIDENCE and t[3] >= 1]
    lig_colour = max(sure or rest, key=lambda t: t[3], default=None)
    if lig_colour is not None and lig_colour[3] >= 1:
        for r in lig_colour[1]:
            out.extend(_ligand_words(r))
    return out


# ----------------------------------------------------------------------------- decoding helpers


def decode(glyphs: Sequence[Glyph], allowed: Sequence[frozenset[str] | None]) -> tuple[str, float]:
    """Best string with the i-th glyph restricted to ``allowed[i]`` (None: anything), and its log-probability."""
    text, lp = [], 0.0
    for g, allow in zip(glyphs, allowed):
        if g.fixed:  # found by its shape: certain, if the place allows it
            text.append(g.fixed)
            lp += 0.0 if allow is None or g.fixed in allow else math.log(1e-9)
            continue
        p = g.probs.copy()
        if allow is not None:
            mask = np.array([ch in allow for ch in ALPHABET])
            p = np.where(mask, p, 0.0)
        k = int(np.argmax(p))
        text.append(ALPHABET[k])
        lp += math.log(max(float(p[k]), 1e-9))
    return "".join(text), lp


# Modified amino acids in the protein chains of the PoseBusters entries (305 read; residues, most common first):
# MSE 21, OCS 12, MLY 9, SEP 6, KCX 6, TPO 4, CME 3, PTR 3, SNN 2, CSO 2, TYS 1, CSD 1, LLP 1, CSX 1, 4OG 1 —
# 73 of about 10^5 residues. Only these are read as written (4OG left out: a name's glyphs are read as letters); the
# recogniser is overconfident in a crowded spot (FSP for ASP at 35 000 : 1), and 15 % of the one-letter changes of a
# standard name spell some CCD amino acid (PRQ).
MODIFIED_RESIDUES = ("MSE", "OCS", "MLY", "SEP", "KCX", "TPO", "CME", "PTR", "SNN", "CSO", "TYS", "CSD", "LLP", "CSX")
MODIFIED_ODDS = 1e3  # a modified name is kept when the glyphs support it this many times better than any standard one


def residue_name_reading(glyphs: Sequence[Glyph]) -> tuple[str, float]:
    """(name, log-probability) of a residue label's three glyphs, read as a pocket residue's name.

    The pocket is the protein's amino acids (:mod:`misi_agent.structure`). The letters read one by one are kept when
    they spell a standard residue, or one of :data:`MODIFIED_RESIDUES` that the glyphs support :data:`MODIFIED_ODDS`
    times better than the best standard name; anything else (``FSP``, ``WLA``: a glyph misread where a stick or
    another label crosses the text) is read as the standard name the glyphs support best. Raster T9 pictures, 20
    items: the groups near the ligand carrying their residue's text 71.6 → 74.6 %; T9 end to end one item lost on
    raster (46.25 → 45.54), one gained on PyMOL (6.71 → 7.27), see ``eval/results/image_hbonds_residue_fit.md``."""
    if len(glyphs) != 3:
        raise ValueError(f"a residue name has three letters, got {len(glyphs)} glyphs")
    free, lp_free = decode(glyphs, [LETTERS] * 3)
    if free in STANDARD_RESIDUES:
        return free, lp_free
    # each standard name scored as decode scores a spelling it is held to
    score = {name: decode(glyphs, [frozenset(ch) for ch in name])[1] for name in STANDARD_RESIDUES}
    best = max(score, key=score.__getitem__)
    lp_best = score[best]
    if free in MODIFIED_RESIDUES and lp_free - lp_best > math.log(MODIFIED_ODDS):
        return free, lp_free
    return best, lp_best


def residue_reading(label: LabelRead) -> tuple[str, str, float] | None:
    """(name, number with insertion code, log-probability) of a residue label read as ``XXX 123``:
    the name an amino acid (:func:`residue_name_reading`), digits forced in the number (a trailing letter is kept
    only when the network is sure of it)."""
    if len(label.words) != 2 or len(label.words[0]) != 3 or not label.words[1]:
        return None
    name, lp1 = residue_name_reading(label.words[0])
    num_glyphs = label.words[1]
    allowed = [DIGITS | {"-"}] + [DIGITS] * (len(num_glyphs) - 1)
    if len(num_glyphs) > 1 and num_glyphs[-1].char in LETTERS and num_glyphs[-1].confidence > 0.9:
        allowed[-1] = LETTERS
    number, lp2 = decode(num_glyphs, allowed)
    return name, number, lp1 + lp2


ELEMENTS = ("C", "N", "O", "S", "P", "F", "CL", "BR", "I", "B", "SE", "FE", "ZN", "MG", "CU", "CO", "NI", "MN", "CA",
            "NA", "K", "AS", "SI", "HG", "PT", "RU", "V", "W", "MO", "AL", "GA", "AU", "AG", "CD", "TE", "SB", "SN")


def atom_name_reading(glyphs: Sequence[Glyph], element: str | None = None) -> tuple[str, float]:
    """Best atom name for ``glyphs``: an element symbol (``element`` when known) followed by digits,
    letters and primes, ambiguous glyphs after the element read as digits (``O1`` not ``OI``).

    Returns (name, log-probability); every element of :data:`ELEMENTS` that fits is tried.
    """
    best = ("", -1e18)
    els = [element.upper()] if element else list(ELEMENTS)
    cls = _class_string(glyphs)
    for el in els:
        if len(el) > len(glyphs):
            continue
        allowed: list[frozenset[str] | None] = [frozenset(ch) for ch in el]
        for k in range(len(el), len(glyphs)):
            if cls[k] == "'":
                allowed.append(frozenset("'"))
            elif cls[k] == "L":
                allowed.append(LETTERS)
            else:
                allowed.append(DIGITS | ({"'"} if glyphs[k].char == "'" else set()))
        text, lp = decode(glyphs, allowed)
        if lp > best[1]:
            best = (text, lp)
    return best


# ----------------------------------------------------------------------------- training


TRAIN_FONTS = (  # (how to load, label used in reports)
    ("pillow-default", "Aileron (Pillow's bundled font)"),
    ("DejaVuSans.ttf", "DejaVu Sans"),
    ("DejaVuSans-Bold.ttf", "DejaVu Sans Bold"),
    ("DejaVuSansMono.ttf", "DejaVu Sans Mono"),
    ("DejaVuSansMono-Bold.ttf", "DejaVu Sans Mono Bold"),
    ("DejaVuSerif.ttf", "DejaVu Serif"),
    ("STIXGeneral.ttf", "STIX General"),
    ("STIXGeneralBol.ttf", "STIX General Bold"),
)


def _font(spec: str, size: int) -> ImageFont.FreeTypeFont:
    if spec == "pillow-default":
        return ImageFont.load_default(size=size)
    import matplotlib

    return ImageFont.truetype(str(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / spec), size)


def _random_text(rng: np.random.Generator) -> str:
    from misi_agent.knowledge.hbonds import load_templates

    kind = rng.random()
    if kind < 0.4:
        names = sorted(load_templates().residues)
        return f"{names[int(rng.integers(len(names)))]} {int(rng.integers(1, 2000))}"
    el = rng.choice(["C", "C", "C", "N", "O", "O", "S", "P", "F", "CL", "BR", "B", "I"])
    tail = "".join(rng.choice(list("0123456789"), size=int(rng.integers(0, 3))))
    if rng.random() < 0.35:
        tail += str(rng.choice(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ")))
    if rng.random() < 0.12:
        tail += "'"
    if rng.random() < 0.25:  # random letters too, so every letter is seen often
        return "".join(rng.choice(list(ALPHABET[:36]), size=int(rng.integers(1, 5))))
    return el + tail


def render_label(text: str, font: ImageFont.FreeTypeFont, colour=(255, 250, 200), outline: bool = True) -> np.ndarray:
    """A label as the renderers draw it: ``colour`` text with a 1-px black outline on black (RGB array)."""
    left, top, right, bottom = font.getbbox(text)
    w, h = right - left + 8, bottom - top + 8
    fill = Image.new("L", (w, h), 0)
    ImageDraw.Draw(fill).text((4 - left, 4 - top), text, fill=255, font=font)
    img = Image.new("RGB", (w, h), (0, 0, 0))
    img.paste(colour, (0, 0, w, h), fill)
    return np.asarray(img)


def _training_set(n: int, seed: int, fonts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Glyph features with their true characters, read from rendered labels by the same segmentation."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    while len(y) < n:
        text = _random_text(rng)
        spec = fonts[int(rng.integers(len(fonts)))]
        size = int(rng.integers(8, 19))
        rgb = render_label(text, _font(spec, size))
        v = _hsv(rgb)[..., 2]
        im = Image.fromarray((v * 255).astype(np.uint8))
        sx = rng.uniform(0.8, 1.4)  # other fonts are wider or narrower
        im = im.resize((max(1, int(round(im.width * sx))), im.height), Image.BILINEAR)
        if rng.random() < 0.5:  # blur like a ray tracer's antialiasing
            im = im.filter(ImageFilter.GaussianBlur(rng.uniform(0.2, 0.6)))
        v = np.asarray(im, np.float32) / 255.0
        v = np.clip(v * rng.uniform(0.75, 1.1), 0, 1)
        mask = v >= ALPHA_MIN
        comps = _components(mask, np.where(mask, v, 0.0), v, 0.3)
        labels = _group_words(comps)
        chars = [ch for ch in text if ch != " "]
        if len(labels) != 1:
            continue
        glyph_comps = [(c, w) for w in labels[0] for c in w]
        if len(glyph_comps) != len(chars):
            continue
        for (c, w), ch in zip(glyph_comps, chars):
            top = min(cc.y0 for cc in w)
            big_h = [cc.y1 - cc.y0 for cc in w if cc.y1 - cc.y0 >= MIN_GLYPH_H]
            line_h = max(big_h) if big_h else 1
            X.append(glyph_features(c.patch, c.y0, c.y1, top, top + line_h))
            y.append(ALPHABET.index(ch))
    return np.array(X, np.float32), np.array(y, np.int64)


def label_grid_scene(texts_res: Sequence[tuple[str, int]], texts_lig: Sequence[str], seed: int = 0):
    """A scene that is only labels: residues (one CA atom each, labelled ``NAME number``) and ligand
    atoms (labelled with their names) on a loose grid, far enough apart that labels do not touch.
    Rendering it gives labelled text in a renderer's own font (training data for the glyph network)."""
    from misi_agent.scene import Scene
    from misi_agent.structure import ResidueKey

    rng = np.random.default_rng(seed)
    n_res, n_lig = len(texts_res), len(texts_lig)
    n = n_res + n_lig
    cols = 4
    rows = int(math.ceil(n / cols))
    xs = np.linspace(-11.0, 9.0, cols)
    ys = np.linspace(13.0, -13.0, max(rows, 2))
    coords = []
    for k in range(n):
        x, y = xs[k % cols] + rng.uniform(-0.8, 0.8), ys[k // cols] + rng.uniform(-0.3, 0.3)
        coords.append((x, y, -60.0 + rng.uniform(-2, 2)))
    coords = np.array(coords, float)
    keys = tuple(ResidueKey("A", int(num), "", name) for name, num in texts_res)
    return Scene(pdb_id="grid", ligand_code="LIG", coords=coords,
                 elements=np.array(["C"] * n), atom_names=np.array(["CA"] * n_res + list(texts_lig)),
                 is_ligand=np.array([False] * n_res + [True] * n_lig), residue=np.array(list(range(n_res)) + [-1] * n_lig),
                 residue_keys=keys, bonds=np.zeros((0, 2), int), bond_orders=np.zeros(0, int))


def rendered_training_set(renderer: str, n_images: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Glyph features read from label-grid scenes drawn by ``renderer`` (``raster`` or ``pymol``),
    aligned with the known text wherever the segmentation finds exactly one glyph per character."""
    from misi_agent.camera import Camera
    from misi_agent.render.base import get_renderer

    rng = np.random.default_rng(seed)
    ren = get_renderer(renderer)
    X, y = [], []
    scenes, golds = [], []
    for k in range(n_images):
        res, lig = [], []
        for _ in range(36):
            t = _random_text(rng)
            if " " in t:
                name, num = t.split(" ")
                res.append((name, int(num)))
            else:
                lig.append(t)
        sc = label_grid_scene(res, lig, seed=seed + k)
        scenes.append(sc)
        golds.append(sc.labels())
    images = ren.render_many(scenes, 512) if hasattr(ren, "render_many") else [ren.render(s) for s in scenes]
    if hasattr(ren, "close"):
        ren.close()
    cam = Camera(512, 512)
    model = None
    for sc, gold, rendering in zip(scenes, golds, images):
        rgb = as_rgb(rendering.image)
        hsv = _hsv(rgb)
        v = hsv[..., 2]
        xy, _ = cam.project(np.array([p for _, p in gold]))
        pix = rgb.astype(np.float32)
        chroma = _chroma_of(hsv)
        for col in text_colours(rgb, hsv, v >= 0.0):
            found = colour_alpha(pix, chroma, v, col)
            if found is None:
                continue
            alpha, mask = found
            comps = _components(mask, np.where(mask, np.clip(alpha, 0, 1), 0.0), v, 0.3)
            for words in _group_words(comps):
                cs = [c for w in words for c in w]
                cx = (min(c.x0 for c in cs) + max(c.x1 for c in cs)) / 2
                cy = (min(c.y0 for c in cs) + max(c.y1 for c in cs)) / 2
                d = np.hypot(xy[:, 0] - cx, xy[:, 1] - cy)
                k = int(np.argmin(d))
                chars = [ch for ch in gold[k][0] if ch != " "]
                if d[k] > 40 or len(chars) != len(cs):
                    continue
                for w in words:
                    top = min(c.y0 for c in w)
                    big_h = [c.y1 - c.y0 for c in w if c.y1 - c.y0 >= MIN_GLYPH_H]
                    line_h = max(big_h) if big_h else 1
                    for c in w:
                        ch = chars.pop(0)
                        X.append(glyph_features(c.patch, c.y0, c.y1, top, top + line_h))
                        y.append(ALPHABET.index(ch))
    return np.array(X, np.float32).reshape(-1, PATCH * PATCH + N_EXTRA), np.array(y, np.int64)


def train_glyph_model(out: Path = MODEL_PATH, n: int = 60000, seed: int = 0, fonts: Sequence[str] | None = None,
                      epochs: int = 30, rendered: Sequence[tuple[str, int]] = ()) -> dict[str, float]:
    """Train the glyph network on rendered labels and save it (numpy arrays, a few hundred kB).

    Deterministic for a seed (torch on CPU, one thread). Returns training and held-out accuracy.
    """
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    fonts = tuple(fonts or [f for f, _ in TRAIN_FONTS])
    X, y = _training_set(n, seed, fonts)
    n_rendered = 0
    for k, (renderer, n_images) in enumerate(rendered):
        Xr, yr = rendered_training_set(renderer, n_images, seed + 100 + k)
        n_rendered += len(yr)
        X, y = np.concatenate([X, np.repeat(Xr, 3, axis=0)]), np.concatenate([y, np.repeat(yr, 3)])
    Xv, yv = _training_set(max(2000, n // 10), seed + 1, fonts)
    mean, std = X.mean(axis=0), X.std(axis=0) + 1e-3
    xt = torch.tensor((X - mean) / std)
    yt = torch.tensor(y)
    net = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                              torch.nn.ReLU(), torch.nn.Linear(128, len(ALPHABET)))
    opt = torch.optim.Adam(net.parameters(), lr=2e-3, weight_decay=1e-5)
    g = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        perm = torch.randperm(len(yt), generator=g)
        for k in range(0, len(perm), 256):
            idx = perm[k:k + 256]
            xb = xt[idx] + 0.05 * torch.randn(len(idx), xt.shape[1], generator=g)
            loss = torch.nn.functional.cross_entropy(net(xb), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        for pg in opt.param_groups:
            pg["lr"] = 2e-3 * 0.5 * (1 + math.cos(math.pi * (epoch + 1) / epochs))
    lin = [m for m in net if isinstance(m, torch.nn.Linear)]
    model = {"mean": mean, "std": std, "alphabet": np.array(ALPHABET)}
    for k, m in enumerate(lin, start=1):
        model[f"w{k}"] = m.weight.detach().numpy().T.astype(np.float32)
        model[f"b{k}"] = m.bias.detach().numpy().astype(np.float32)
    acc_train = float(np.mean(np.argmax(glyph_probs(X, model), 1) == y))
    acc_val = float(np.mean(np.argmax(glyph_probs(Xv, model), 1) == yv))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".part.npz")
    np.savez_compressed(tmp, **model)
    tmp.replace(out)
    load_glyph_model.cache_clear()
    return {"n_train": int(len(y)), "n_rendered_glyphs": n_rendered, "train_accuracy": acc_train,
            "heldout_accuracy": acc_val}


if __name__ == "__main__":  # python -m misi_agent.tools.label_reading --train
    import sys

    if "--train" in sys.argv[1:]:
        # the committed model: synthetic labels in eight fonts plus label grids drawn by both renderers
        print(train_glyph_model(rendered=(("raster", 40), ("pymol", 40))))
