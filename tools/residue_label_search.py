"""Residue labels found in 3D: a label drawn at its residue's CA is sought at points in space, not in one picture.

Why: PyMOL draws each residue's label centred on its CA, and about the ligand the labels pile up. In a pile the
reader reads nothing and word spotting in one picture
(:func:`~misi_agent.tools.label_spotting.with_hidden_residue_labels`) finds a text only where most of its glyphs beat
every rival template there, which strokes of the neighbours' labels seldom allow: on the 20 PyMOL T9 test items, 36
of the residues that make a true H-bond were left without their name and number (and TRP -37, whose minus sign the
reader's alphabet lacks). Yet at the true CA's place in each of the six views the true text still correlates 0.5–0.9
with its glyphs, and averaged over the views it ranks first among the 2 500–5 900 texts worth trying (20 names, the
numbers near those read) on 28 of those 36, second or third on the rest (a number cut short, ``SER 131`` for ``SER
138``).
The views agree only where the label really is: a pile fits some text in one view, not the same text at the
projections of one point in six.

So each residue name's correlation (its three glyphs, :class:`~misi_agent.tools.label_spotting.Spotter`'s maps,
each glyph free to slide a few pixels) is gathered from every view at the projections of the points of a grid about
the rebuilt ligand, for each width of number the label may have (the text is centred on the point), averaged over
the views; at each local peak every number worth trying is scored with the name, the best text kept where its mean
reaches :data:`MIN_TEXT` and no glyph follows it (``LEU 34`` inside ``LEU 349``) in most of the views where it fits;
texts closer than :data:`APART_A` to a better one are dropped (two CAs are 3.8 Å apart along the chain). Each kept
text's point is then refined by triangulating its best place in the views where it fits.

Only where the labels are drawn at their atoms (the residue-label ruler set the scale,
:func:`~misi_agent.tools.label_triangulation.scale_ruled_by_labels`): the raster renderer places its labels beside
the atoms. Measured (``eval/results/image_hbonds.md``, forty-fifth session): on the 20 PyMOL T9 test items the search
keeps 16–51 texts an item, 9 of those 36 residues among them; of its texts at 0.74 or more 94 % name the residue at
that CA, at 0.70–0.74 76 % (the misses a digit off: ``ALA 109`` for ``ALA 169``). T9 replayed from staged states
31.84 → 33.24 (7dkt 0.60 → 0.80, 7lev 0 → 0.08, none lower), a fresh full run 32.72 → 33.87 (7ecr 0.71 → 0.67: Lys
114 no longer placed beside the right texts found next to it); kept down to 0.60, 19 of the 36 are found, and kept
down to 0.64 the answers are the same on all 20 items: the residues found are placed only where their fit passes and
a ligand N/O was rebuilt within reach, and their partners are often the ligand atoms the pictures do not rebuild.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

import numpy as np
from scipy import ndimage

from misi_agent.knowledge import STANDARD_RESIDUES
from misi_agent.tools.label_reading import ImageLabels
from misi_agent.tools.label_spotting import (HiddenPlace, Spotter, nearby_numbers, place_label, read_views,
                                             residue_label_colour)
from misi_agent.tools.label_triangulation import _angstrom, cameras, normalised, triangulate

GRID_A = 0.5  # Å between grid points (about 5 px at the PyMOL items' scale; each glyph map is widened to cover it)
PAD_A = 10.0  # Å: the grid reaches this far from the rebuilt ligand atoms (a Lys or Arg CA to its partner is ~7 Å)
WIDEN_PX = 3  # px: a name's map is maximum-filtered this far each way so that a grid point near the CA still scores
NAME_PEAK = 0.66  # mean correlation of a name over the views at a grid peak for its numbers to be tried
MIN_TEXT = 0.70  # mean correlation over the views of a whole text for it to be kept
FIT_VIEW = 0.65  # a view where the text correlates this well takes part in the end check and the refinement
APART_A = 3.0  # Å: a text this close to a better one is the same label (or a rival's strokes)
MAX_PEAKS = 400  # name peaks whose numbers are tried, best first


@dataclass(frozen=True)
class FoundLabel:
    """A residue text found in space: ``coords`` (Å, the reconstruction's front frame) where its CA is, the views
    where it fits (:data:`FIT_VIEW`), and its mean correlation over all views."""

    text: str
    coords: np.ndarray
    views: tuple[str, ...]
    score: float


def _name_volume(sp: Mapping[str, Spotter], uv: Mapping[str, np.ndarray], name: str, example: str
                 ) -> np.ndarray | None:
    """Mean over the views of ``name``'s correlation at the grid points, the text laid out as ``example`` (a text of
    the number width) centred on each point's projection; None when a view cannot spell it."""
    total = None
    for v, s in sp.items():
        if not s.t.can_spell(example.replace(" ", "")):
            return None
        full = s.layout(example)
        hh, ww = s.extent(full)
        made = s.text_map(full[:len(name)])
        if made is None:
            return None
        m = ndimage.maximum_filter(made[0] / len(name), size=2 * WIDEN_PX + 1, mode="constant", cval=-1.0)
        i = np.round(uv[v][:, 1] - hh / 2.0).astype(int)
        j = np.round(uv[v][:, 0] - ww / 2.0).astype(int)
        ok = (i >= 0) & (i < m.shape[0]) & (j >= 0) & (j < m.shape[1])
        val = np.where(ok, m[np.clip(i, 0, m.shape[0] - 1), np.clip(j, 0, m.shape[1] - 1)], 0.0)
        val = np.maximum(val, 0.0)
        total = val if total is None else total + val
    return None if total is None else total / len(sp)


class _Texts:
    """The texts ``name n`` for every number ``n`` of one width, laid out in one view: per text and glyph the
    character and its offset from the text's top-left, and the text's extent, as arrays for scoring them together."""

    def __init__(self, s: Spotter, name: str, numbers: list[int]):
        lays = [s.layout(f"{name} {n}") for n in numbers]
        self.chars = np.array([[ch for ch, _, _ in lay] for lay in lays])
        self.x = np.array([[x for _, x, _ in lay] for lay in lays])
        self.y = np.array([[y for _, _, y in lay] for lay in lays])
        ext = np.array([s.extent(lay) for lay in lays])
        self.hh, self.ww = ext[:, 0], ext[:, 1]

    def scores(self, s: Spotter, centre: np.ndarray, reach: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per text, its best mean glyph correlation within ``reach`` px of its place centred on ``centre`` (px),
        and the top-left (i, j) of that place."""
        d = np.arange(-reach, reach + 1)
        di, dj = (a.ravel() for a in np.meshgrid(d, d, indexing="ij"))
        i0 = np.round(centre[1] - self.hh / 2.0).astype(int)[:, None] + di[None, :]  # (texts, offsets)
        j0 = np.round(centre[0] - self.ww / 2.0).astype(int)[:, None] + dj[None, :]
        rows = i0[:, :, None] + self.y[:, None, :]  # (texts, offsets, glyphs)
        cols = j0[:, :, None] + self.x[:, None, :]
        vals = np.full(rows.shape, -1.0)
        chars = np.broadcast_to(self.chars[:, None, :], rows.shape)
        for ch in np.unique(self.chars):
            m = s._map(str(ch))
            sel = chars == ch
            r, c = rows[sel], cols[sel]
            ok = (r >= 0) & (r < m.shape[0]) & (c >= 0) & (c < m.shape[1])
            vals[sel] = np.where(ok, m[np.clip(r, 0, m.shape[0] - 1), np.clip(c, 0, m.shape[1] - 1)], -1.0)
        mean = vals.mean(axis=2)
        b = mean.argmax(axis=1)
        k = np.arange(len(b))
        return np.maximum(mean[k, b], 0.0), i0[k, b], j0[k, b]


def grid_about(xyz: np.ndarray, pad: float, step: float) -> tuple[np.ndarray, tuple[int, int, int], np.ndarray]:
    """A regular grid (``step`` Å) over the box of ``xyz`` widened by ``pad``: its points (n, 3) in x-major order,
    its shape, and which points lie within ``pad`` of some point of ``xyz``."""
    lo, hi = xyz.min(0) - pad, xyz.max(0) + pad
    axes = [np.arange(lo[k], hi[k] + 1e-9, step) for k in range(3)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    near = np.zeros(len(grid), bool)
    for p in xyz:
        near |= np.einsum("ij,ij->i", grid - p, grid - p) <= pad ** 2
    return grid, (len(axes[0]), len(axes[1]), len(axes[2])), near


def known_label_points(rec, labels: Mapping[str, ImageLabels]) -> dict[str, np.ndarray]:
    """The triangulated points (Å) of the residue texts read in two or more views."""
    from misi_agent.tools.label_triangulation import residue_label_points

    views_of = read_views(labels)
    return {t: p.coords for t, p in residue_label_points(rec, labels, r"[A-Z]{3} -?\d+[A-Z]?").items()
            if len(views_of.get(t, ())) >= 2}


def _placed_spotters(rec, spotters: Mapping[str, Mapping[str, Spotter]]) -> tuple[dict[str, Spotter], dict]:
    """The views' residue-label spotters whose view has a camera and whose font has a space, with the cameras."""
    sp = {v: k["residue"] for v, k in spotters.items() if "residue" in k}
    cams = cameras(rec, sp)
    return {v: s for v, s in sp.items() if v in cams and s.t.space is not None}, cams


def searched_residue_labels(rec, labels: Mapping[str, ImageLabels], spotters: Mapping[str, Mapping[str, Spotter]],
                            known: Mapping[str, np.ndarray] | None = None) -> list[FoundLabel]:
    """Residue texts found at points about the ligand where the views agree on them (see the module's docstring),
    best first. ``known``: the points of the texts read in two or more views (:func:`known_label_points`), where the
    caller has them; a text known at another place is not taken here."""
    sp, cams = _placed_spotters(rec, spotters)
    lig = np.asarray(rec.coords, float)[np.asarray(rec.is_ligand, bool)]
    if len(sp) < 2 or not len(lig):
        return []
    numbers: dict[int, list[int]] = {}
    for n in sorted(x for x in nearby_numbers(labels) if x >= 0):
        numbers.setdefault(len(str(n)), []).append(n)
    if not numbers:
        return []
    grid, shape, near = grid_about(lig, PAD_A, GRID_A)
    pts = grid[near]
    uv = {v: cams[v].project(normalised(rec, pts))[0] for v in sp}
    peaks: list[tuple[float, str, int, np.ndarray]] = []
    for name in STANDARD_RESIDUES:
        for width, nums in numbers.items():
            got = _name_volume(sp, uv, name, f"{name} {nums[0]}")
            if got is None:
                continue
            vol = np.zeros(len(grid))
            vol[near] = got
            vol = vol.reshape(shape)
            top = (vol == ndimage.maximum_filter(vol, size=5)) & (vol >= NAME_PEAK)
            for g in np.flatnonzero(top.ravel()):
                peaks.append((float(vol.ravel()[g]), name, width, grid[g]))
    peaks.sort(key=lambda x: -x[0])
    known = known if known is not None else known_label_points(rec, labels)
    texts: dict[tuple[str, str, int], _Texts] = {}
    found: list[tuple[float, str, np.ndarray, dict]] = []
    for _, name, width, p in peaks[:MAX_PEAKS]:
        nums = [n for n in numbers[width] if all(s.t.can_spell(f"{name}{n}") for s in sp.values())]
        if not nums:
            continue
        per_view = {}
        for v, s in sp.items():
            key = (v, name, width)
            if key not in texts:
                texts[key] = _Texts(s, name, nums)
            per_view[v] = texts[key].scores(s, cams[v].project(normalised(rec, p[None]))[0][0])
        mean = np.mean([x[0] for x in per_view.values()], axis=0)
        for k, n in enumerate(nums):  # a text read elsewhere is that residue's label, not this one
            q = known.get(f"{name} {n}")
            if q is not None and np.linalg.norm(q - p) > APART_A:
                mean[k] = -1.0
        k = int(np.argmax(mean))
        if mean[k] >= MIN_TEXT:
            found.append((float(mean[k]), f"{name} {nums[k]}", p,
                          {v: (float(x[0][k]), int(x[1][k]), int(x[2][k])) for v, x in per_view.items()}))
    found.sort(key=lambda x: -x[0])
    out: list[FoundLabel] = []
    for m, text, p, per in found:
        fit = [v for v, (s, _, _) in per.items() if s >= FIT_VIEW]
        if len(fit) < 2:
            continue
        goes_on = sum(sp[v]._continues(sp[v].layout(text), per[v][1], per[v][2]) for v in fit)
        if 2 * goes_on >= len(fit):
            continue
        obs = []
        for v in fit:
            hh, ww = sp[v].extent(sp[v].layout(text))
            obs.append((cams[v], np.array([per[v][2] + ww / 2.0, per[v][1] + hh / 2.0])))
        q = _angstrom(rec, triangulate(obs))
        if np.linalg.norm(q - p) > 2 * GRID_A:
            q = p
        if any(np.linalg.norm(q - o.coords) < APART_A for o in out):
            continue
        out.append(FoundLabel(text, q, tuple(fit), m))
    return out


def with_searched_residue_labels(rec, labels: Mapping[str, ImageLabels],
                                 spotters: Mapping[str, Mapping[str, Spotter]]) -> dict[str, ImageLabels]:
    """``labels`` with the residue texts :func:`searched_residue_labels` finds added as reads in every view where the
    text fits there (:data:`FIT_VIEW`), so that the steps that place residues at their labels' points
    (:func:`~misi_agent.tools.image_hbonds._refitted_at_labels`) take them like read ones. A text already read in two
    or more views is left as read (it triangulates by itself); so is a found one whose place a label read in two or
    more views under another text holds."""
    known = known_label_points(rec, labels)
    found = searched_residue_labels(rec, labels, spotters, known)
    if not found:
        return dict(labels)
    views_of = read_views(labels)
    sp = {v: k["residue"] for v, k in spotters.items() if "residue" in k}
    cams = cameras(rec, sp)
    colours = {v: residue_label_colour(labels[v]) for v in sp}
    extra: dict[str, list] = {}
    for lp in found:
        if len(views_of.get(lp.text, ())) >= 2:
            continue
        if any(t != lp.text and np.linalg.norm(q - lp.coords) < APART_A for t, q in known.items()):
            continue
        name = lp.text.split()[0]
        for v in lp.views:
            if colours[v] is None:
                continue
            lay = sp[v].layout(lp.text)
            hh, ww = sp[v].extent(lay)
            u = cams[v].project(normalised(rec, lp.coords[None]))[0][0]
            i, j = int(round(u[1] - hh / 2.0)), int(round(u[0] - ww / 2.0))
            place = HiddenPlace(v, (i, j), name, ((lp.text, lp.score),))
            extra.setdefault(v, []).append(place_label(sp[v], place, lp.text, colours[v]))
    out = dict(labels)
    for v, labs in extra.items():
        out[v] = replace(labels[v], labels=labels[v].labels + tuple(labs))
    return out


EXTEND_MARGIN = 0.03  # a text whose number extends the best one's (``ALA 110`` of ``ALA 11``) is taken within this


def number_at(rec, spotters: Mapping[str, Mapping[str, Spotter]], name: str, point: np.ndarray,
              numbers: list[int]) -> FoundLabel | None:
    """The text ``name n`` that PyMOL's label drawn at ``point`` (a residue's CA, Å, the reconstruction's front frame)
    shows, ``n`` among ``numbers``: the best mean glyph correlation over the views (each text centred on the point's
    projection, free to slide a few pixels), or a text whose number extends that one's and scores within
    :data:`EXTEND_MARGIN` of it; kept when its mean reaches :data:`MIN_TEXT` and it fits two or more views at
    :data:`FIT_VIEW`. None when no text is kept.

    Why: a residue the pictures rebuilt and fitted whose label the reader could not read in any view (a pile) has a
    name (its template fit) but no number, so its bonds cannot be written; its name and CA narrow the label to a few
    hundred texts at one known place. There a number cut short scores a little above the whole one (its glyphs are
    the whole one's first glyphs, and the last glyph is the one a neighbour's strokes most often cover): at the CAs
    of 6yqw's 44 labelled residues whose number is among those worth trying (PyMOL, 512 px), the best text was the
    true one cut short for 25 and the true one 0.001-0.027 below it; taking the extension within 0.03 names all 44
    right, where the search's check for a following glyph named 33 (piles cover the next place too)."""
    sp, cams = _placed_spotters(rec, spotters)
    if len(sp) < 2:
        return None
    p = np.asarray(point, float)
    at = {v: cams[v].project(normalised(rec, p[None]))[0][0] for v in sp}  # the point's projection in each view
    scored: list[tuple[float, int, dict]] = []
    for width in sorted({len(str(n)) for n in numbers}):
        nums = [n for n in numbers if len(str(n)) == width and all(s.t.can_spell(f"{name}{n}") for s in sp.values())]
        if not nums:
            continue
        per_view = {v: _Texts(s, name, nums).scores(s, at[v], reach=3)[0] for v, s in sp.items()}
        mean = np.mean(list(per_view.values()), axis=0)
        scored += [(float(mean[k]), n, {v: float(x[k]) for v, x in per_view.items()}) for k, n in enumerate(nums)]
    if not scored:
        return None
    best = max(scored, key=lambda x: (x[0], -x[1]))
    while True:
        longer = [x for x in scored if len(str(x[1])) > len(str(best[1])) and str(x[1]).startswith(str(best[1]))
                  and x[0] >= best[0] - EXTEND_MARGIN]
        if not longer:
            break
        best = max(longer, key=lambda x: (x[0], -x[1]))
    fit = tuple(v for v, x in best[2].items() if x >= FIT_VIEW)
    if best[0] < MIN_TEXT or len(fit) < 2:
        return None
    return FoundLabel(f"{name} {best[1]}", p, fit, best[0])
