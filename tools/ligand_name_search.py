"""Ligand N/O atom names found in 3D: a name drawn at a fixed offset from its atom is sought at points in space.

Why: PyMOL hides much of a ligand under the pocket's labels, and the reconstruction rebuilds only the atoms whose
balls show; the names read (:func:`~misi_agent.tools.label_triangulation.ligand_label_points`) and checked at the
rebuilt atoms (:mod:`~misi_agent.tools.ligand_name_spotting`) cannot bring back an atom that was never rebuilt. On the
20 PyMOL T9 test items 63 of 136 true bonds were lost for want of their ligand atom (forty-fifth session,
``eval/results/image_hbonds.md``). Yet each hidden atom's name is still drawn just above it in every view, and at the
true atom's label place its true name, averaged over its best views, ranks first among the item's N/O names for 17
of 41 such atoms.

So, as :mod:`~misi_agent.tools.residue_label_search` does for residue labels at their CAs, each N/O name worth
trying (:func:`candidate_names`) is correlated with its glyphs in every view, at the label place (the projection plus
the item's label offset, :func:`~misi_agent.tools.ligand_name_spotting.ligand_label_offset`) of each point of a grid
about the rebuilt ligand, and the mean of its :data:`~misi_agent.tools.ligand_name_spotting.VIEWS_USED` best views
taken (a label may be covered in the others). A name's best point is kept where

* the mean reaches :data:`MIN_NAME` and the name fits (:data:`~misi_agent.tools.label_spotting.MIN_SCORE`) in
  :data:`MIN_FIT_VIEWS` views or more;
* no other name worth trying fits that label place better, longer names favoured as the name check favours them
  (:data:`~misi_agent.tools.ligand_name_spotting.LENGTH_BONUS`): the place is this name's, not a carbon's (``C24``
  for ``O24``) or another N/O's;
* it is not the front of a longer name drawn there (``N4`` of ``N41``, ``O1`` of ``O1G``): no name one glyph longer
  fits as well with its first glyphs in the same place, in the views where the name fits.

Each kept point is refined by triangulating the name's best places in those views. Only where labels are drawn at
their atoms (the residue labels ruled the scale): the raster renderer moves labels out of each other's way.

Measured (``eval/results/image_hbonds.md``, forty-sixth session; 20 PyMOL T9 test items, the staged final complexes'
names skipped, the truth read only to measure): 60 names found, 40 at their own atom (within 1 Å; triangulated to
0.05–0.6 Å), 17 of them partners of gold bonds the complexes lacked (of 53); most wrong ones are the front of a longer
name whose last glyph is covered or is a prime the reader's alphabet lacks (``O5`` on ``O5'``). Taken by
:func:`~misi_agent.tools.image_hbonds.with_labelled_ligand_atoms`: T9 replayed from staged states 33.24 → 36.90
together with a poor restrained residue fit retried (none lower), a fresh full run 33.87 → 37.63. 4–12 s an item.
"""
from __future__ import annotations

import re
from typing import Any, Collection, Mapping

import numpy as np
from scipy import ndimage

from misi_agent.tools.label_reading import ImageLabels
from misi_agent.tools.label_spotting import MIN_SCORE
from misi_agent.tools.label_triangulation import (LabelPoint, _angstrom, cameras, element_of_name, normalised,
                                                  triangulate)
from misi_agent.tools.ligand_name_spotting import LENGTH_BONUS, VIEWS_USED, _text_corners
from misi_agent.tools.residue_label_search import grid_about

GRID_A = 0.4  # Å between grid points (about 4 px at the PyMOL items' scale; each map is widened to cover it)
PAD_A = 3.0  # Å: the grid reaches this far from the rebuilt ligand atoms (a hidden atom one or two bonds away)
WIDEN_PX = 2  # px: a name's map is maximum-filtered this far each way
REACH_PX = 2  # px: the rival names are checked this far around the label place
MIN_NAME = 0.70  # mean correlation of a name over its best views at its best point for the point to be kept
MIN_FIT_VIEWS = 3  # views where the name fits at its point (MIN_SCORE)
APART_A = 1.0  # Å: a name found this close to a better one is the same label
SOUGHT = ("N", "O")  # the elements whose atoms are sought: the H-bond partners
SUFFIXES = "0123456789ABGD'"  # glyphs that may follow a name in a longer one
PREFIX_GLYPH = 0.55  # a glyph that may follow the name fitting this well where it would follow: a longer name
_READ_NAME = re.compile(r"^[CNOSP]([1-9]\d?|0[1-9]|[1-9][A-Z']|[A-Z][1-9]|A[A-Z])$")


def candidate_names(labels: Mapping[str, ImageLabels]) -> list[str]:
    """The ligand atom names worth trying: element and number (``C1`` … ``P60``, ``N01`` … ``N09``), a number and a
    letter or prime (``O1A``, ``O2'``), ``OP1`` / ``O1P``, ``OAB``-style names, and the ligand names read that look
    like atom names (:data:`_READ_NAME`; fragments of piled labels such as ``NC`` or ``N0`` are left out)."""
    out: set[str] = set()
    for e in "CNOSP":
        out |= {f"{e}{n}" for n in range(1, 61)} | {f"{e}{n:02d}" for n in range(1, 10)}
        out |= {f"{e}{n}{s}" for n in range(1, 10) for s in "ABGD'"}
        out |= {f"{e}P{n}" for n in range(1, 5)} | {f"{e}{n}P" for n in range(1, 5)}
        out |= {f"{e}A{c}" for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
    read = {str(lab.text).strip().upper() for labs in labels.values() for lab in labs.of_kind("ligand")}
    return sorted(out | {t for t in read if _READ_NAME.match(t)})


def _best_place(s, lay, i0: int, j0: int, reach: int) -> tuple[float, int, int]:
    """The text's best mean glyph correlation within ``reach`` px of top-left (i0, j0), and where."""
    d = np.arange(-reach, reach + 1)
    di, dj = (a.ravel() for a in np.meshgrid(d, d, indexing="ij"))
    vals = s.means_at(lay, i0 + di, j0 + dj)
    k = int(np.argmax(vals))
    return float(vals[k]), int(i0 + di[k]), int(j0 + dj[k])


def searched_ligand_names(rec, labels: Mapping[str, ImageLabels], spotters: Mapping[str, Mapping[str, Any]],
                          offset: np.ndarray, skip: Collection[str] = ()) -> list[LabelPoint]:
    """N/O ligand names found at points about the rebuilt ligand where their labels are drawn (see the module's
    docstring), best first, each as a :class:`~misi_agent.tools.label_triangulation.LabelPoint` at its atom (Å, the
    reconstruction's front frame). ``offset``: the label's offset (px) from its atom; ``skip``: names already placed
    (read), not sought again."""
    sp = {v: k["ligand"] for v, k in spotters.items() if "ligand" in k}
    cams = cameras(rec, sp)
    sp = {v: s for v, s in sp.items() if v in cams}
    lig = np.asarray(rec.coords, float)[np.asarray(rec.is_ligand, bool)]
    if len(sp) < VIEWS_USED or not len(lig):
        return []
    grid, _, near = grid_about(lig, PAD_A, GRID_A)
    pts = grid[near]
    uv = {v: cams[v].project(normalised(rec, pts))[0] + offset for v in sp}
    pool = [n for n in candidate_names(labels) if all(s.t.can_spell(n) for s in sp.values())]
    bonus = {n: LENGTH_BONUS * max(0, len(n) - 2) for n in pool}
    found: list[tuple[float, str, np.ndarray]] = []
    for name in pool:
        if element_of_name(name) not in SOUGHT or name in skip:
            continue
        rows = []
        for v, s in sp.items():
            lay = s.layout(name)
            made = s.text_map(lay)
            if made is None:
                break
            m = ndimage.maximum_filter(made[0] / len(lay), size=2 * WIDEN_PX + 1, mode="constant", cval=-1.0)
            _, i, j = _text_corners(s, name, uv[v])
            ok = (i >= 0) & (i < m.shape[0]) & (j >= 0) & (j < m.shape[1])
            rows.append(np.where(ok, m[np.clip(i, 0, m.shape[0] - 1), np.clip(j, 0, m.shape[1] - 1)], -1.0))
        else:
            score = np.sort(np.array(rows), axis=0)[-VIEWS_USED:].mean(axis=0)
            k = int(np.argmax(score))
            if score[k] >= MIN_NAME:
                found.append((float(score[k]), name, pts[k]))
    found.sort(key=lambda x: -x[0])
    out: list[LabelPoint] = []
    for score, name, p in found:
        if any(np.linalg.norm(q.coords - p) < APART_A for q in out):
            continue
        point = _checked(rec, sp, cams, offset, name, p, pool, bonus)
        if point is not None and not any(np.linalg.norm(q.coords - point.coords) < APART_A for q in out):
            out.append(point)
    return out


def _next_glyph(sp, places: Mapping[str, tuple], fit: list[str], name: str) -> float:
    """The best mean correlation, over the views in ``fit``, of a glyph that may follow ``name`` in a longer name
    (:data:`SUFFIXES`), at the place where it would follow the name found there: the extra glyph's share of the
    longer text's mean correlation with its first glyphs where the name's are."""
    n = len(name)
    best = -1.0
    for c in SUFFIXES:
        longer = name + c
        if not all(sp[v].t.can_spell(longer) for v in fit):
            continue
        vals = [(n + 1) * sp[v].means_at(sp[v].layout(longer), np.array([places[v][2]]), np.array([places[v][3]]))[0]
                - n * places[v][1] for v in fit]
        best = max(best, float(np.mean(vals)))
    return best


def _checked(rec, sp, cams, offset: np.ndarray, name: str, p: np.ndarray, pool: list[str],
             bonus: Mapping[str, float]) -> LabelPoint | None:
    """``name``'s point ``p`` as a LabelPoint where the checks of the module's docstring pass, else None."""
    at = {v: cams[v].project(normalised(rec, p[None]))[0][0] + offset for v in sp}
    places = {}
    for v, s in sp.items():
        lay, i0, j0 = _text_corners(s, name, at[v][None])
        places[v] = (lay,) + _best_place(s, lay, int(i0[0]), int(j0[0]), REACH_PX)
    fit = [v for v, (_, val, _, _) in places.items() if val >= MIN_SCORE]
    if len(fit) < MIN_FIT_VIEWS:
        return None
    own = float(np.mean(sorted(x[1] for x in places.values())[-VIEWS_USED:])) + bonus[name]
    for rival in pool:
        if rival == name:
            continue
        vals = []
        for v, s in sp.items():
            lay, i0, j0 = _text_corners(s, rival, at[v][None])
            vals.append(_best_place(s, lay, int(i0[0]), int(j0[0]), REACH_PX)[0])
        if float(np.mean(sorted(vals)[-VIEWS_USED:])) + bonus[rival] > own:
            return None
    if _next_glyph(sp, places, fit, name) >= PREFIX_GLYPH:
        return None
    obs = []
    for v in fit:
        lay, _, i, j = places[v]
        hh, ww = sp[v].extent(lay)
        obs.append((cams[v], np.array([j + ww / 2.0, i + hh / 2.0]) - offset))
    q = _angstrom(rec, triangulate(obs))
    if not np.all(np.isfinite(q)) or np.linalg.norm(q - p) > 2 * GRID_A:
        q = p
    return LabelPoint(name, q, tuple(fit), 0.0)
