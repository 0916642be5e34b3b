"""The built-in raster renderer on real fixtures: determinism, colours, motion, framing, labels."""
from __future__ import annotations

import colorsys
from pathlib import Path

import numpy as np
import pytest

from misi_agent.camera import VIEW_NAMES, Camera
from misi_agent.render.base import Rendering, get_renderer, project_scene
from misi_agent.render.raster import (LIGAND_LABEL_COLOR, RESIDUE_LABEL_COLOR, RasterRenderer, label_sprite,
                                      place_labels)
from misi_agent.scene import HEX, hex_to_rgb, scene_from_complex
from misi_agent.structure import load_complex

DATA = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"
SIZE = 512


@pytest.fixture(scope="module")
def cx():
    return load_complex(DATA / "6yqw.cif.gz", "82I")


@pytest.fixture(scope="module")
def front(cx):
    return scene_from_complex(cx, "front")


def pixels(rendering: Rendering) -> np.ndarray:
    return np.asarray(rendering.image.convert("RGB")).astype(int)


def unoccluded(scene, rendering: Rendering, atoms: np.ndarray, px: float) -> np.ndarray:
    """Atoms with no nearer atom whose screen centre lies within ``px`` pixels."""
    keep = []
    for i in atoms:
        d = np.hypot(*(rendering.screen - rendering.screen[i]).T)
        nearer = (rendering.depth < rendering.depth[i]) & (d < px)
        nearer[i] = False
        if not nearer.any():
            keep.append(i)
    return np.array(keep, int)


def hue(rgb) -> float:
    r, g, b = (c / 255.0 for c in rgb)
    return colorsys.rgb_to_hsv(r, g, b)[0]


def hue_distance(a: float, b: float) -> float:
    d = abs(a - b) % 1.0
    return min(d, 1.0 - d)


def test_renderer_interface_and_projection(front):
    r = get_renderer("raster").render(front, SIZE)
    assert r.renderer == "raster" and r.image.size == (SIZE, SIZE) and r.image.mode == "RGB"
    screen, depth, radius, visible = project_scene(front, Camera(SIZE, SIZE))
    np.testing.assert_allclose(r.screen, screen)
    np.testing.assert_allclose(r.depth, depth)
    np.testing.assert_allclose(r.radius_px, radius)
    assert np.array_equal(r.visible, visible) and visible.all()


def test_deterministic_bytes(front):
    first = RasterRenderer().render(front, SIZE).png_bytes()
    label_sprite.cache_clear()  # a cold label cache must give the same pixels
    second = RasterRenderer().render(front, SIZE).png_bytes()
    assert first == second
    batch = RasterRenderer().render_many([front, front.apply("roll y 30")], SIZE)
    assert batch[0].png_bytes() == first
    assert batch[1].png_bytes() != first


def test_ligand_oxygen_is_red_nitrogen_blue(front):
    ligand = front.subset(front.is_ligand)
    r = RasterRenderer(labels=False).render(ligand, SIZE)
    img = pixels(r)
    checked = 0
    for element, channel in (("O", 0), ("N", 2)):
        atoms = unoccluded(ligand, r, np.flatnonzero(ligand.elements == element), px=r.radius_px.max())
        for i in atoms:
            x, y = np.rint(r.screen[i]).astype(int)
            rgb = img[y, x]
            assert rgb[channel] > 1.5 * max(np.delete(rgb, channel)), (element, rgb)
            checked += 1
    assert checked >= 2


def test_pocket_carbons_alternate_purple_and_orange(front):
    r = RasterRenderer(labels=False).render(front, SIZE)
    img = pixels(r)
    classes = np.array(front.color_classes())
    for cls in ("POCKET_C0", "POCKET_C1"):
        atoms = unoccluded(front, r, np.flatnonzero(classes == cls), px=8)
        assert len(atoms) >= 10
        target = hue(hex_to_rgb(HEX[cls]))
        hits = sum(hue_distance(hue(img[int(round(r.screen[i, 1])), int(round(r.screen[i, 0]))]), target) < 0.04
                   for i in atoms)
        assert hits >= 0.8 * len(atoms), (cls, hits, len(atoms))
    # Neighbouring residues differ in colour class.
    res_class = {int(front.residue[i]): classes[i] for i in np.flatnonzero((front.elements == "C") & ~front.is_ligand)}
    ks = sorted(res_class)
    assert all(res_class[a] != res_class[b] for a, b in zip(ks, ks[1:]) if b == a + 1)


def test_depth_cue_darkens_far_atoms(front):
    r = RasterRenderer(labels=False).render(front, SIZE)
    img = pixels(r)
    pocket_o = unoccluded(front, r, np.flatnonzero((front.elements == "O") & ~front.is_ligand), px=8)
    order = pocket_o[np.argsort(r.depth[pocket_o])]
    near, far = order[: len(order) // 4], order[-len(order) // 4:]
    red = lambda idx: np.mean([img[int(round(r.screen[i, 1])), int(round(r.screen[i, 0])), 0] for i in idx])
    assert red(near) > red(far) + 40


def centroid_of_content(rendering: Rendering) -> np.ndarray:
    img = pixels(rendering).sum(axis=2)
    ys, xs = np.nonzero(img > 30)
    return np.array([xs.mean(), ys.mean()])


def test_move_x_shifts_content_right(front):
    renderer = RasterRenderer(labels=False)
    before = renderer.render(front, SIZE)
    after = renderer.render(front.apply("move x 2"), SIZE)
    shift = centroid_of_content(after) - centroid_of_content(before)
    expected = Camera(SIZE, SIZE).focal * 2.0 / float(np.mean(before.depth))
    assert 0.8 * expected < shift[0] < 1.2 * expected
    assert abs(shift[1]) < 1.0
    up = renderer.render(front.apply("move y 2"), SIZE)
    assert centroid_of_content(up)[1] < centroid_of_content(before)[1] - 0.8 * expected


@pytest.mark.parametrize("name,code", [("6yqw.cif.gz", "82I"), ("7x9k.cif.gz", "8OG"), ("1aku.pdb.gz", None)])
def test_six_views_nothing_clipped(name, code):
    cx = load_complex(DATA / name, code)
    renderer = RasterRenderer()
    for view in VIEW_NAMES:
        scene = scene_from_complex(cx, view)
        r = renderer.render(scene, SIZE)
        assert r.visible.all(), view
        margin = r.radius_px + 2
        assert (r.screen >= margin[:, None]).all() and (r.screen <= SIZE - 1 - margin[:, None]).all(), view
        img = pixels(r)
        border = np.concatenate([img[0], img[-1], img[:, 0], img[:, -1]])
        assert border.max() == 0, view  # atoms, sticks and labels all stay inside
        for text, _, x, y in place_labels(scene, Camera(SIZE, SIZE), SIZE):
            w, h = label_sprite(text, 11, RESIDUE_LABEL_COLOR)[1].size
            assert 1 <= x and x + w <= SIZE - 1 and 1 <= y and y + h <= SIZE - 1, (view, text)


def _near(img: np.ndarray, color, tol: int = 14) -> np.ndarray:
    return (np.abs(img - np.array(color)) <= tol).all(axis=2)


def _label_like(img: np.ndarray, color) -> np.ndarray:
    """Pixels that are ``color`` blended over black (antialiased text): a * color with a >= 0.5."""
    c = np.array(color, float)
    a = (img @ c) / (c @ c)
    residual = np.abs(img - a[..., None] * c).max(axis=2)
    return (a >= 0.5) & (residual <= 16)


def test_labels_present_for_every_residue_and_ligand_atom(front):
    with_labels = RasterRenderer().render(front, SIZE)
    without = RasterRenderer(labels=False).render(front, SIZE)
    assert with_labels.png_bytes() != without.png_bytes()
    img = pixels(with_labels)
    bare = pixels(without)
    placed = place_labels(front, Camera(SIZE, SIZE), SIZE)
    texts = [t for t, *_ in placed]
    assert sorted(texts) == sorted(t for t, _ in front.labels())
    assert {c for _, c, *_ in placed} == {RESIDUE_LABEL_COLOR, LIGAND_LABEL_COLOR}
    shown = 0
    for text, color, x, y in placed:
        w, h = label_sprite(text, 11, color)[1].size
        tile = img[y:y + h, x:x + w]
        new = _label_like(tile, color) & ~_label_like(bare[y:y + h, x:x + w], color)
        shown += int(new.sum() >= 20)
    assert shown >= 0.95 * len(placed)
    # Label colours are not atom colours: (almost) no label-coloured pixel without labels.
    assert _label_like(bare, RESIDUE_LABEL_COLOR).sum() < 20 and _label_like(bare, LIGAND_LABEL_COLOR).sum() < 20


def test_label_font_scales_with_image_size(front):
    small = RasterRenderer().render(front, 256)
    large = RasterRenderer().render(front, 1024)
    n_small = _label_like(pixels(small), RESIDUE_LABEL_COLOR).sum()
    n_large = _label_like(pixels(large), RESIDUE_LABEL_COLOR).sum()
    assert n_large > 6 * n_small


def test_atoms_behind_near_plane_are_skipped(front):
    # Put the camera inside the pocket: about half of the atoms end up behind it.
    depth_centre = float(-front.centroid[2])
    inside = front.apply(f"move z {depth_centre:.1f}")
    behind = -inside.coords[:, 2] <= 0.5
    assert 0.2 < behind.mean() < 0.8
    renderer = RasterRenderer(labels=False)
    r = renderer.render(inside, SIZE)
    assert not r.visible[behind].any()
    only_front = renderer.render(inside.subset(~behind), SIZE)
    assert r.png_bytes() == only_front.png_bytes()
    assert pixels(r).max() > 0
