"""Where a labelled atom is in 3D, from where its name label is drawn in the views.

The renderers write every ligand atom's name beside the atom. Where the reconstruction missed the
atom (PyMOL piles the labels of a pocket on top of the ligand and its balls are hidden), the
label still tells where the atom is: the name is read (:mod:`misi_agent.tools.label_reading`) or
spotted as a known text (:mod:`misi_agent.tools.label_spotting`) in several views, and the rays
through those places, less the label's offset from its atom, meet at the atom.

* :func:`label_offset`: how far a ligand label is drawn from its atom, on screen, learnt from the
  item itself (the densest offset between read ligand labels and the projected rebuilt ligand atoms
  of their element; no renderer constant: PyMOL draws a label ~7 px above its atom at 512 px);
* :func:`triangulate`: the point whose projections best meet a set of (view, pixel) places;
* :func:`text_point`: a known text's places in every view (read, else the best spots), the pair of
  views on different axes whose intersection most other views agree with (within
  :data:`AGREE_PX`), refined over all that agree;
* :func:`residue_label_distance`: the camera distance (the Å scale) from the labels of residues that follow
  each other in the chain: a label drawn at its residue's CA, two consecutive CAs lie 3.81 Å apart;
  :func:`rescaled_by_residue_labels` rebuilds a scene at that distance;
* :func:`dolly_camera`: the front camera moved in, the view after ``move z d`` (image 4 of a zooming item), whose
  labels are triangulated with the initial views'.

On 30 PyMOL interaction-location items of the training split, the question's ligand atom placed this
way lay within 0.5 Å of the true atom in 18 of the 20 items where two or more views agreed (median 0.1 Å), and the
rebuilt atom the labels pointed to was 2.4–11 Å off in 13 of those 20 (``eval/results/label_spotting.md``). Raster
labels are moved out of each other's way, so they sit at no one offset from their atoms: there the points lay a
median 3.1–3.6 Å off on two raster renderings (7n4w, 7rh3), and the caller must not prefer them to atoms
identity has named.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from misi_agent.camera import FOV_DEG, view_rotation
from misi_agent.tools.reconstruction import NormView

AGREE_PX = 4.0  # a view agrees with a triangulated point when one of the text's places there lies this close to it
OFFSET_REACH_PX = 25.0  # label-to-atom offsets beyond this are not the label's own atom
OFFSET_BIN_PX = 3.0  # offsets this close to each other count as one offset
SAME_AXIS_COS = 0.9  # two views looking along nearly the same line (front and back) cannot triangulate
CA_CA_A = 3.811  # Å between consecutive CAs (trans peptide): mean of 2739 pairs in 50 PDB entries (3.80 often quoted)
RULER_TOL = 0.04  # estimates within this share of each other count as one scale
RULER_MIN_PAIRS = 4  # the densest scale must rest on this many consecutive label pairs ...
RULER_MIN_SHARE = 0.4  # ... and this share of the pairs not set aside as too far apart (RULER_APART; labels drawn
# beside their atoms scatter: raster T9 <= 0.23 of all pairs)
RULER_APART = 0.6  # pairs whose estimate is below this share of the densest one's are no chain neighbours (labels
# over CA_CA_A / 0.6 = 6.4 Å apart at that scale: residues of two chains numbered alike) and do not count among all
RULER_MIN_SHARE_ALL = 0.25  # ... but the densest group must hold this share of all pairs, the far ones included: among
# scattered labels a spurious dense group makes most others look far apart (raster T9 7d5c: 8 of 52, 1.19x the truth)
RULED_SOURCE = "CA-CA"  # how a scale_source taken from the residue labels begins
POINT_SIGMA_A = 0.3  # Å: the uncertainty of a placed atom (0.1–0.5 Å from the true one where views agree, PyMOL)


@dataclass(frozen=True)
class LabelPoint:
    """A text's triangulated place: ``coords`` in Å in the reconstruction's front frame, the views that agree
    on it, and the largest of their distances (px) to it."""

    text: str
    coords: np.ndarray
    views: tuple[str, ...]
    residual_px: float


def cameras(rec, views: Any, fov_deg: float | None = None) -> dict[str, NormView]:
    """The benchmark camera (``fov_deg``, default :data:`~misi_agent.camera.FOV_DEG`) of each named view, in the
    reconstruction's normalised frame; names that are not canonical views are left out."""
    w, h = (int(x) for x in getattr(rec, "image_size", (512, 512)))
    focal = (w / 2.0) / math.tan(math.radians(fov_deg or FOV_DEG) / 2.0)
    out = {}
    for v in views:
        try:
            out[v] = NormView(v, w, h, focal, view_rotation(v))
        except (KeyError, ValueError):
            continue
    return out


def dolly_camera(rec, advance: float, view: str = "front") -> NormView:
    """The camera of ``view`` moved ``advance`` (a share of the camera distance) toward the scene: the view after
    ``move z d`` with ``advance`` = d / D."""
    return replace(cameras(rec, [view])[view], distance=1.0 - float(advance))


def normalised(rec, xyz: np.ndarray) -> np.ndarray:
    D = float(rec.distance)
    return (np.asarray(xyz, float) + np.array([0.0, 0.0, D])) / D


def _angstrom(rec, p: np.ndarray) -> np.ndarray:
    D = float(rec.distance)
    return np.asarray(p, float) * D - np.array([0.0, 0.0, D])


def label_offset(rec, labels: Mapping[str, Any]) -> tuple[np.ndarray, int]:
    """The on-screen offset (px) of a ligand atom's label from the atom, and how many label–atom pairs share it.

    Every read ligand label is paired with every rebuilt ligand atom of the element its name begins with, seen
    within :data:`OFFSET_REACH_PX`; the offsets of the right pairs coincide, those of the wrong ones scatter, so the
    offset with most others within :data:`OFFSET_BIN_PX` is taken (the median of those). (0, 0) and 0 when no
    pair exists."""
    from misi_agent.tools.identity import element_of_class

    cams = cameras(rec, labels)
    lig = np.flatnonzero(np.asarray(rec.is_ligand, bool))
    if not len(lig):
        return np.zeros(2), 0
    norm = normalised(rec, np.asarray(rec.coords, float)[lig])
    els = np.array([str(element_of_class(c)).upper()[:1] for c in np.asarray(rec.classes)[lig]])
    offs = []
    for v, cam in cams.items():
        xy = cam.project(norm)[0]
        for lab in labels[v].of_kind("ligand"):
            el = str(lab.text).strip().upper()[:1]
            d = np.asarray(lab.centre, float) - xy[els == el]
            offs.extend(d[np.hypot(d[:, 0], d[:, 1]) < OFFSET_REACH_PX])
    if not offs:
        return np.zeros(2), 0
    offs = np.array(offs)
    near = np.hypot(offs[:, None, 0] - offs[None, :, 0], offs[:, None, 1] - offs[None, :, 1]) < OFFSET_BIN_PX
    k = int(np.argmax(near.sum(axis=1)))
    return np.median(offs[near[k]], axis=0), int(near[k].sum())


def long_reads(labels: Mapping[str, Any], min_chars: int = 2) -> dict[str, Any]:
    """``labels`` without the ligand labels read as fewer than ``min_chars`` characters: in a pile of names the reader
    reads one-letter fragments, whose centres are not a label's, and :func:`label_offset` over them came out a glyph
    aside (6 of 20 PyMOL T9 items, e.g. (−8.5, −6.2) px against (−0.5, −7.5))."""
    return {v: replace(l, labels=tuple(x for x in l.labels
                                       if x.kind != "ligand" or len(str(x.text).strip()) >= min_chars))
            for v, l in labels.items()}


def triangulate(obs: list[tuple[NormView, np.ndarray]]) -> np.ndarray:
    """The normalised front-frame point whose rays through the (camera, pixel) observations meet best (linear least
    squares on the two ray equations of each view)."""
    A, b = [], []
    for cam, uv in obs:
        s = cam.rays(np.asarray(uv, float)[None])[0]
        A += [cam.R[0] + s[0] * cam.R[2], cam.R[1] + s[1] * cam.R[2]]
        b += [s[0] * cam.distance, s[1] * cam.distance]
    return np.linalg.lstsq(np.array(A), np.array(b), rcond=None)[0]


def text_places(labels: Mapping[str, Any], spotters: Mapping[str, Mapping[str, Any]] | None, kind: str, text: str,
                max_spots: int = 3) -> dict[str, list[np.ndarray]]:
    """Per view, the centres of the labels read as ``text``; where none was read, of the places it was spotted."""
    want = str(text).strip().upper()
    out: dict[str, list[np.ndarray]] = {}
    for v, labs in labels.items():
        read = [np.asarray(lab.centre, float) for lab in labs.of_kind(kind)
                if str(lab.reading or lab.text or "").strip().upper() == want]
        if not read and kind in (spotters or {}).get(v, {}):
            read = [np.asarray(s.centre, float) for s in spotters[v][kind].spot(want, max_spots)]
        if read:
            out[v] = read
    return out


def text_point(rec, places: Mapping[str, list[np.ndarray]], offset: np.ndarray, text: str = "",
               min_views: int = 2, extra_cams: Mapping[str, NormView] | None = None) -> LabelPoint | None:
    """The atom under a text placed at ``places`` (:func:`text_places`), labels drawn ``offset`` px from their atoms.

    Every pair of places in two views on different axes is intersected; the intersection most views agree with
    (one of their places within :data:`AGREE_PX`; ties: the smaller summed distance) is refined over those views.
    None when fewer than ``min_views`` views agree or they do not span two axes. ``extra_cams``: cameras of views that
    are not canonical (:func:`dolly_camera`), by the names ``places`` gives them."""
    cams = {**cameras(rec, places), **{v: c for v, c in (extra_cams or {}).items() if v in places}}
    pts = {v: [np.asarray(p, float) - offset for p in ps] for v, ps in places.items() if v in cams}
    best: list[tuple[str, np.ndarray, float]] = []
    for a, b in itertools.combinations(sorted(pts), 2):
        if abs(float(cams[a].R[2] @ cams[b].R[2])) > SAME_AXIS_COS:
            continue
        for ua in pts[a]:
            for ub in pts[b]:
                p = triangulate([(cams[a], ua), (cams[b], ub)])
                agree = []
                for v, us in pts.items():
                    e = np.hypot(*(np.array(us) - cams[v].project(p[None])[0][0]).T)
                    j = int(np.argmin(e))
                    if e[j] < AGREE_PX:
                        agree.append((v, us[j], float(e[j])))
                if len(agree) > len(best) or (len(agree) == len(best) and
                                              sum(x[2] for x in agree) < sum(x[2] for x in best)):
                    best = agree
    if len(best) < min_views:
        return None
    axes = [cams[v].R[2] for v, _, _ in best]
    if all(abs(float(axes[0] @ z)) > SAME_AXIS_COS for z in axes[1:]):
        return None
    p = triangulate([(cams[v], u) for v, u, _ in best])
    res = max(float(np.hypot(*(cams[v].project(p[None])[0][0] - u))) for v, u, _ in best)
    return LabelPoint(text, _angstrom(rec, p), tuple(v for v, _, _ in best), res)


def residue_label_distance(rec, labels: Mapping[str, Any], min_share: float = RULER_MIN_SHARE,
                           extra_cams: Mapping[str, NormView] | None = None) -> tuple[float | None, str]:
    """The camera distance (Å) that puts consecutive residues' labels :data:`CA_CA_A` apart, and how it was found.

    Where a renderer draws each residue's label at its CA (PyMOL), the labels of residues ``n`` and ``n + 1``
    (``ARG 45``, ``GLY 46``), triangulated (:func:`text_point`, no offset: a shared offset cancels in the
    difference), lie one CA–CA step apart in the reconstruction's normalised frame, whatever the ligand shows;
    each such pair gives ``CA_CA_A / distance``. The densest group of these estimates (within :data:`RULER_TOL` of
    each other) is taken when it holds :data:`RULER_MIN_PAIRS` pairs, ``min_share`` (default
    :data:`RULER_MIN_SHARE`) of all but those that put their labels too far apart to be chain neighbours at its
    scale (:data:`RULER_APART`: in a dimer's pocket, ``ILE 50`` of one chain and ``TYR 51`` of the other), and
    :data:`RULER_MIN_SHARE_ALL` of all: misread numbers, cis peptides and labels drawn at a side-chain centroid fall
    outside it, and where labels are moved beside their atoms (the raster renderer) a group is seldom that dense
    and the answer is then None. ``extra_cams``: cameras of views that are not canonical (image 4 of a zooming
    item, :func:`dolly_camera`), by their names in ``labels``. Measured on 20 PyMOL T9 test items and 20 of the
    training split: 0.98–1.02 of the true distance on every item (5–46 pairs, 56–100 % of them in the group; the
    ligand's balls gave 0.37–1.21), none taken on the 20 raster T9 test items (10–23 %); on 50 T7 pockets (no
    ligand drawn): PyMOL 6z14 0.997, raster 6 of 50 taken (40–61 %), all 0.979–1.004 of the truth
    (``eval/results/label_spotting.md``; these figures are from before pairs too far apart were set aside, which
    changed no T9 decision, took more raster T7 pockets, 59.49 → 60.49, and lets dimer pockets rule zooming,
    ``eval/results/zoom_scale.md``). A pair's two labels may be triangulated from different views; a label offset
    shared by the initial views is a smaller shift in image 4, whose scene is larger, so such pairs carry a small
    bias (PyMOL draws residue labels centred on their CAs: 0.5 px).
    """
    return ruler_distance(consecutive_label_steps(rec, labels, extra_cams), min_share)


def residue_label_points(rec, labels: Mapping[str, Any], pattern: str,
                         extra_cams: Mapping[str, NormView] | None = None) -> dict[str, LabelPoint]:
    """Every residue label text read in some view that matches ``pattern`` (whole text), triangulated where its reads
    meet (:func:`text_point`, no offset): the residues' CAs where labels are drawn at them. Shared by the CA–CA ruler
    (:func:`consecutive_label_steps`) and T9's refits about the labels' points."""
    texts = sorted({str(lab.reading or "").strip().upper() for labs in labels.values()
                    for lab in labs.of_kind("residue")} - {""})
    out = {}
    for t in texts:
        if re.fullmatch(pattern, t):
            p = text_point(rec, text_places(labels, None, "residue", t), np.zeros(2), t, extra_cams=extra_cams)
            if p is not None:
                out[t] = p
    return out


def consecutive_label_steps(rec, labels: Mapping[str, Any],
                            extra_cams: Mapping[str, NormView] | None = None) -> np.ndarray:
    """Per pair of consecutive residues' labels (``ARG 45``, ``GLY 46``) triangulated (:func:`text_point`, no
    offset), the camera distance that puts them :data:`CA_CA_A` apart: ``CA_CA_A`` / their normalised distance.
    The triangulation is the costly part of :func:`residue_label_distance`; :func:`ruler_distance` decides."""
    numbered: dict[int, list[np.ndarray]] = {}
    for t, p in residue_label_points(rec, labels, r"[A-Z]{3} (\d+)", extra_cams).items():
        numbered.setdefault(int(t.split()[1]), []).append(normalised(rec, p.coords[None])[0])
    return np.array([CA_CA_A / d for n, ps in numbered.items() for a in ps for b in numbered.get(n + 1, [])
                     if (d := float(np.linalg.norm(a - b))) > 0])


def ruler_distance(est: np.ndarray, min_share: float = RULER_MIN_SHARE,
                   min_pairs: int = RULER_MIN_PAIRS) -> tuple[float | None, str]:
    """The decision of :func:`residue_label_distance` over the pairs' estimates
    (:func:`consecutive_label_steps`): the densest group's median where it holds ``min_pairs`` pairs, ``min_share``
    of those not too far apart and :data:`RULER_MIN_SHARE_ALL` of all; else None. A pure function, so one
    triangulation serves several thresholds (zooming tries a smaller group where no balls give the scale)."""
    if not len(est):
        return None, "no consecutive residue labels triangulated"
    counts = [(np.abs(est / c - 1) <= RULER_TOL).sum() for c in est]
    k = int(np.argmax(counts))
    group = est[np.abs(est / est[k] - 1) <= RULER_TOL]
    near = int(np.sum(est >= RULER_APART * np.median(group)))
    far = f", {len(est) - near} of them too far apart to be neighbours" if near < len(est) else ""
    if (len(group) < min_pairs or len(group) < min_share * near
            or len(group) < RULER_MIN_SHARE_ALL * len(est)):
        return None, f"consecutive residue labels disagree ({len(group)} of {len(est)} pairs on one scale{far})"
    return float(np.median(group)), f"{RULED_SOURCE} of {len(group)} of {len(est)} consecutive residue label pairs{far}"


def rescaled_by_residue_labels(images_by_view: Mapping[str, Any], views, rec, labels: Mapping[str, Any]):
    """The reconstruction again at the camera distance the consecutive residue labels give
    (:func:`residue_label_distance`), where they give one; else ``rec`` with the reason in its notes.

    The ligand's balls, the usual ruler, hide under PyMOL's label piles (7 of 40 PyMOL T9 items scaled 0.37–1.21
    of the truth, the others 0.93–1.07); the labels' CA–CA steps gave 0.98–1.02 on all 40, and the residues fitted
    at that scale lie closer to the truth (within 1 Å: 49.7 → 50.4 % and 51.9 → 53.5 % on two sets of 20). Used
    by T9 (:func:`~misi_agent.tools.image_hbonds.pocket_hbonds_from_images`) and by T7 for its pocket, which
    shows no ligand at all (:func:`~misi_agent.tools.image_tasks.solve_docking`). ``views``: the loaded views
    (:func:`~misi_agent.tools.reconstruction.load_views`) or None to load them again."""
    from misi_agent.tools.reconstruction import reconstruct

    D, source = residue_label_distance(rec, labels)
    if D is None:
        return replace(rec, notes=tuple(rec.notes) + (source,))
    again = reconstruct(images_by_view, distance=D, views=views)
    return replace(again, scale_source=f"{source} (the ligand gave {rec.distance:.1f} A)")


def scale_ruled_by_labels(rec) -> bool:
    """Whether ``rec``'s Å scale came from its consecutive residue labels (:func:`rescaled_by_residue_labels`): then
    the renderer draws labels at their anchors (PyMOL), where a renderer that moves them aside (raster) gives no
    ruler."""
    return str(getattr(rec, "scale_source", "")).startswith(RULED_SOURCE)


CONFIRM_A = 1.0  # Å: a placed name this close to a rebuilt ligand atom of its element is confirmed by it
NEAR_A = 2.5  # Å: a placed name this close to a rebuilt ligand atom, none of its element within CONFIRM_A, contradicts


LIGAND_CLASS = {"C": "LIGAND_C", "N": "N", "O": "O", "S": "S", "P": "P", "F": "F", "CL": "CL"}  # element -> the
# reconstruction's colour class of a ligand atom (:mod:`misi_agent.tools.atom_detection`)


def element_of_name(name: str) -> str:
    """The element an atom name begins with (``CL12`` → ``CL``, ``C12`` → ``C``, ``O1B`` → ``O``)."""
    t = str(name).strip().upper()
    if t[:2] in ("CL", "BR") and not t[2:3].isalpha():
        return t[:2]
    return t[:1]


def with_ligand_atoms(rec, points: Sequence[LabelPoint], bond_a: float | None = None):
    """The record with one ligand atom appended at each point (class from its name's element, ligand carbon for an
    element without a class of its own; uncertainty :data:`POINT_SIGMA_A`; seen in no view), bonded to the ligand
    atoms (those appended before it included) closer than ``bond_a`` when given. Existing indices are kept."""
    if not points:
        return rec
    coords = np.asarray(rec.coords, float)
    n0 = len(coords)
    xyz = np.vstack([coords] + [np.asarray(p.coords, float)[None] for p in points])
    lig = np.append(np.asarray(rec.is_ligand, bool), np.ones(len(points), bool))
    bonds = [tuple(int(x) for x in b) for b in np.asarray(rec.bonds, int).reshape(-1, 2)]
    if bond_a is not None:
        for a in range(n0, len(xyz)):
            bonds += [(int(b), a) for b in np.flatnonzero(lig[:a]) if np.linalg.norm(xyz[a] - xyz[b]) < bond_a]
    classes = [LIGAND_CLASS.get(element_of_name(p.text), "LIGAND_C") for p in points]
    fields = {"coords": xyz, "classes": np.append(np.asarray(rec.classes), classes), "is_ligand": lig,
              "residue": np.append(np.asarray(rec.residue), -np.ones(len(points), int)),
              "bonds": np.array(bonds, int).reshape(-1, 2),
              "image_xy": {v: np.vstack([np.asarray(xy, float), np.full((len(points), 2), np.nan)])
                           for v, xy in rec.image_xy.items()}}
    if getattr(rec, "sigma", None) is not None:
        fields["sigma"] = np.append(np.asarray(rec.sigma, float), np.full(len(points), POINT_SIGMA_A))
    return replace(rec, **fields)


def ligand_label_points(rec, labels: Mapping[str, Any], spotters: Mapping[str, Mapping[str, Any]] | None,
                        min_chars: int = 2, min_share: float = 0.5, offset: np.ndarray | None = None
                        ) -> list[LabelPoint]:
    """Every ligand name read in some view placed where its labels meet (:func:`text_point`): names of
    ``min_chars`` or more characters (a lone ``N`` is also read from fragments of longer labels), where at least
    ``min_share`` of the views that found the name agree on its place. The offset is the one the ligand's names are
    checked at (:func:`~misi_agent.tools.ligand_name_spotting.ligand_label_offset`: measured over the labels of 2+
    characters, :func:`long_reads`, since one-letter fragments of PyMOL's pile put it a glyph aside; over all reads
    before: 20 PyMOL T9 items image-only 15.55 → 17.25); ``offset`` where the caller has measured it."""
    from misi_agent.tools.ligand_name_spotting import ligand_label_offset

    if offset is None:
        offset, _ = ligand_label_offset(rec, labels, spotters)
    texts = sorted({str(lab.text).strip().upper() for labs in labels.values() for lab in labs.of_kind("ligand")
                    if len(str(lab.text).strip()) >= min_chars})
    out = []
    for text in texts:
        places = text_places(labels, spotters, "ligand", text)
        point = text_point(rec, places, offset, text)
        if point is not None and len(point.views) >= min_share * len(places):
            out.append(point)
    return out


def rebuilt_agreement(rec, points: list[LabelPoint]) -> tuple[int, int]:
    """How the reconstruction's own ligand atoms judge the placed names: (confirmed, contradicted) — points with a
    rebuilt ligand atom of their element within :data:`CONFIRM_A`, and points with none there but some rebuilt
    ligand atom within :data:`NEAR_A`. Labels drawn at one offset from their atoms (PyMOL) are mostly confirmed where
    the atoms were rebuilt; labels moved out of each other's way (the raster renderer) land beside them."""
    from misi_agent.tools.identity import element_of_class

    lig = np.flatnonzero(np.asarray(rec.is_ligand, bool))
    if not len(lig) or not points:
        return 0, 0
    xyz = np.asarray(rec.coords, float)[lig]
    els = np.array([str(element_of_class(c)).upper() for c in np.asarray(rec.classes)[lig]])
    confirmed = contradicted = 0
    for p in points:
        d = np.linalg.norm(xyz - p.coords, axis=1)
        if np.any((els == element_of_name(p.text)) & (d < CONFIRM_A)):
            confirmed += 1
        elif np.any(d < NEAR_A):
            contradicted += 1
    return confirmed, contradicted
