"""Atom detection on images of real fixtures drawn by both renderers, checked against the renderers' reported positions.

Ground truth: every ligand atom's screen position and ball radius as the renderer reports
them (``Rendering.screen``, ``radius_px``), and whether the inner half of its ball can be
seen: no nearer ball, stick joint or stick covers it (computed here from the projected
geometry, independently of the detector). Labels are not part of that geometry: the raster
renderer keeps them off the balls, PyMOL's backend writes each ligand atom's name on its
ball, so there the balls are mostly hidden and only precision is asserted with labels on.
One PyMOL worker serves the module.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from misi_agent.render.base import ATOM_RADIUS_LIGAND, STICK_RADIUS
from misi_agent.render.pymol_backend import PyMOLRenderer
from misi_agent.render.raster import LIGAND_STICK_RADIUS, RasterRenderer
from misi_agent.scene import scene_from_complex
from misi_agent.structure import load_complex
from misi_agent.tools.atom_detection import (
    ImageError,
    analyse_image,
    as_rgb,
    calibrate_colours,
    classify_pixels,
    detect_atoms,
)

FIXTURES = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"
CASES = (("6yqw", "82I"), ("7n4w", "P4V"), ("7f5d", "EUO"))
VIEWS = ("front", "left", "top")
TOL_PX = 3.0
EXPECTED = {"LIGAND_C": "LIGAND_C", "O": "O", "N": "N"}


@pytest.fixture(scope="module")
def complexes():
    return {pid: load_complex(FIXTURES / f"{pid}.cif.gz", ligand=code) for pid, code in CASES}


@pytest.fixture(scope="module")
def pymol_plain():
    r = PyMOLRenderer(labels=False)
    yield r
    r.close()


@pytest.fixture(scope="module")
def pymol_labelled():
    r = PyMOLRenderer(labels=True)
    yield r
    r.close()


def visible_ligand_atoms(scene, rend) -> np.ndarray:
    """Ligand atoms whose inner half-disc no nearer ball, joint or stick covers (from the projected geometry)."""
    scr, dep, rad = rend.screen, rend.depth, rend.radius_px
    lig = np.asarray(scene.is_ligand, bool)
    focal = rad * dep / ATOM_RADIUS_LIGAND
    joint = STICK_RADIUS * focal / np.maximum(dep, 1e-6)
    cover = np.where(lig, rad, joint)
    bonds = np.asarray(scene.bonds, int).reshape(-1, 2)
    a, b = bonds[:, 0], bonds[:, 1]
    half = np.where(lig[a] & lig[b], LIGAND_STICK_RADIUS / STICK_RADIUS, 1.0) * joint[a]
    out = []
    for i in np.flatnonzero(lig & rend.visible):
        r_in = 0.5 * rad[i]
        nearer = (dep < dep[i]) & (dep > 0.5)
        nearer[i] = False
        d = np.hypot(*(scr - scr[i]).T)
        if np.any(nearer & (d < r_in + cover)):
            continue
        seg = (dep[a] + dep[b]) / 2 < dep[i] - ATOM_RADIUS_LIGAND
        seg &= (a != i) & (b != i) & (dep[a] > 0.5) & (dep[b] > 0.5)
        if seg.any():
            A, B = scr[a[seg]], scr[b[seg]]
            AB = B - A
            t = np.clip(((scr[i] - A) * AB).sum(1) / np.maximum((AB ** 2).sum(1), 1e-9), 0, 1)
            if np.any(np.hypot(*(A + t[:, None] * AB - scr[i]).T) < r_in + half[seg]):
                continue
        out.append(i)
    return np.array(out, int)


def evaluate(scene, rend) -> tuple[int, int, int, int, int]:
    """(recalled, visible, correct detections, detections, right class among position matches)."""
    det = detect_atoms(rend.image)
    classes = scene.color_classes()
    gt = visible_ligand_atoms(scene, rend)
    centres = det.centres
    hit = 0
    for i in gt:
        if len(centres):
            d = np.hypot(*(centres - rend.screen[i]).T)
            want = EXPECTED.get(classes[i], "OTHER")
            hit += any(det.atoms[j].color_class == want for j in np.flatnonzero(d < TOL_PX))
    lig = np.flatnonzero(scene.is_ligand & rend.visible)
    good = right_class = 0
    for a in det.atoms:
        d = np.hypot(*(rend.screen[lig] - [a.x, a.y]).T)
        if len(d) and d.min() < TOL_PX:
            good += 1
            right_class += EXPECTED.get(classes[lig[d.argmin()]], "OTHER") == a.color_class
    return hit, len(gt), good, len(det.atoms), right_class


def totals(complexes, renderer) -> np.ndarray:
    out = np.zeros(5, int)
    scenes = [scene_from_complex(cx, v) for cx in complexes.values() for v in VIEWS]
    for scene, rend in zip(scenes, renderer.render_many(scenes)):
        out += evaluate(scene, rend)
    return out


@pytest.mark.parametrize("which", ["raster", "raster_labels", "pymol"])
def test_ligand_balls_found_where_the_renderer_put_them(complexes, pymol_plain, which):
    renderer = {"raster": RasterRenderer(labels=False), "raster_labels": RasterRenderer(), "pymol": pymol_plain}[which]
    hit, n_visible, good, n_det, right = totals(complexes, renderer)
    assert n_visible >= 40 and n_det >= 30  # enough atoms that the shares mean something
    recall, precision = hit / n_visible, good / n_det
    assert recall >= 0.75, (which, recall)
    assert precision >= 0.85, (which, precision)
    assert right == good  # every ball found at an atom carries that atom's colour class


def test_pymol_labels_on_balls_cost_recall_not_precision(complexes, pymol_labelled):
    hit, n_visible, good, n_det, right = totals(complexes, pymol_labelled)
    assert n_det >= 10
    assert good / n_det >= 0.75 and right == good
    assert hit >= 10  # some balls stay readable under their names


def test_colour_classes_calibrate_on_each_image(complexes, pymol_plain):
    """Pocket carbons purple/orange, O red, N blue and ligand grey are found in both renderers' pixels."""
    scene = scene_from_complex(complexes["7n4w"], "front")
    for rend in (RasterRenderer().render(scene), pymol_plain.render(scene)):
        pc = classify_pixels(rend.image)
        counts = pc.counts()
        for name in ("O", "N", "LIGAND_C", "POCKET_C0", "POCKET_C1"):
            assert counts[name] > 50, (rend.renderer, name, counts)
        # the centre pixels (3x3) of the pocket carbons in the image mostly show their residue parity class
        classes = scene.color_classes()
        an = analyse_image(rend.image)
        ok = n = 0
        for i in np.flatnonzero(~scene.is_ligand & rend.visible):
            if classes[i] not in ("POCKET_C0", "POCKET_C1"):
                continue
            x, y = (int(v) for v in rend.screen[i])
            win = an.pixels.label[max(0, y - 1):y + 2, max(0, x - 1):x + 2]
            win = win[win >= 0]
            if win.size:
                n += 1
                ok += np.bincount(win).argmax() == pc.names.index(classes[i])
        assert n > 100 and ok / n > 0.8, (rend.renderer, ok, n)  # the rest lie behind other atoms


def test_depth_cue_does_not_change_the_class(complexes):
    """A far atom is darker but keeps its class: the classes of a colour scaled to half brightness agree."""
    rend = RasterRenderer().render(scene_from_complex(complexes["6yqw"], "front"))
    rgb = as_rgb(rend.image)
    model = calibrate_colours(rgb)
    full = classify_pixels(rgb, model=model).label
    half = classify_pixels((rgb.astype(float) * 0.5).astype(np.uint8), model=model).label
    both = (full >= 0) & (half >= 0)
    assert both.sum() > 5000
    assert np.mean(full[both] == half[both]) > 0.97


def test_empty_and_bad_images():
    blank = Image.new("RGB", (128, 128), (0, 0, 0))
    det = detect_atoms(blank)
    assert det.atoms == () and det.notes and det.to_dict()["n_atoms"] == 0
    with pytest.raises(ImageError, match="not found"):
        detect_atoms("/nonexistent/picture.png")
    with pytest.raises(ImageError, match="not an RGB image"):
        detect_atoms(np.zeros((4, 4)))


def test_record_is_plain_json(complexes):
    import json

    det = detect_atoms(RasterRenderer().render(scene_from_complex(complexes["7f5d"], "front")).image)
    d = json.loads(json.dumps(det.to_dict()))
    assert d["n_atoms"] == len(det.atoms) > 5
    assert set(d["class_pixels"]) >= {"O", "N", "LIGAND_C", "POCKET_C0", "POCKET_C1"}
    assert 1.0 <= d["stick_halfwidth"] <= 5.0
