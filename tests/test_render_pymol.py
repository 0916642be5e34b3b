"""PyMOL backend: same camera as ``project_scene`` (measured in the pixels), same picture as the raster renderer.

Atom centres are measured by drawing every atom of a real pocket (6YQW with ligand 82I) as
an isolated ball (no bonds, no labels): each ball that does not touch another one is a
connected blob whose centroid is the atom's centre on the screen. One PyMOL worker serves
the whole module.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage

from misi_agent.camera import NEAR, Camera
from misi_agent.errors import MisiError
from misi_agent.render.base import project_scene
from misi_agent.render.pymol_backend import PyMOLError, PyMOLRenderer, vertical_fov
from misi_agent.render.raster import RasterRenderer
from misi_agent.scene import HEX, Scene, hex_to_rgb, scene_from_complex
from misi_agent.structure import load_complex

FIXTURE = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures" / "6yqw.cif.gz"
TOL_PX = 2.0
CASES = (("front", ""), ("left", ""), ("front", "roll y 30, move x 2"), ("top", "move z 50"))
MIN_ISOLATED = 8  # a case must measure at least this many atoms, so the test cannot pass vacuously


@pytest.fixture(scope="module")
def complex_6yqw():
    return load_complex(FIXTURE, ligand="82I")


@pytest.fixture(scope="module")
def pymol_renderer():
    renderer = PyMOLRenderer(labels=False)
    yield renderer
    renderer.close()


def case_scene(cx, view: str, commands: str) -> Scene:
    scene = scene_from_complex(cx, view)
    return scene.apply(commands) if commands else scene


def as_isolated_balls(scene: Scene) -> Scene:
    """Every atom drawn as a ligand ball and no bonds: each atom becomes its own blob."""
    n = len(scene)
    return replace(scene, is_ligand=np.ones(n, bool), residue=-np.ones(n, int),
                   bonds=np.zeros((0, 2), int), bond_orders=np.zeros(0, int))


def isolated_atoms(rendering, width: int, height: int) -> np.ndarray:
    """Visible atoms whose ball is inside the image and at least 3 px away from every other drawn ball.

    Neighbours include atoms whose centre is outside the image (their ball may reach in).
    """
    screen, radius = rendering.screen, rendering.radius_px
    drawn = np.flatnonzero(rendering.depth > NEAR)
    idx = np.flatnonzero(rendering.visible)
    gap = np.linalg.norm(screen[idx, None] - screen[None, drawn], axis=2) - (radius[idx, None] + radius[None, drawn])
    gap[idx[:, None] == drawn[None, :]] = np.inf
    nearest_gap = gap.min(axis=1) if len(drawn) > 1 else np.full(len(idx), np.inf)
    s, r = screen[idx], radius[idx]
    inside = (s[:, 0] - r > 3) & (s[:, 0] + r < width - 3) & (s[:, 1] - r > 3) & (s[:, 1] + r < height - 3)
    return idx[(nearest_gap > 3.0) & inside]


def blob_centres(image, screen: np.ndarray, atoms: np.ndarray, threshold: int = 12) -> np.ndarray:
    """Centroid (pixel-centre convention) of the non-background blob under each atom's projected centre."""
    arr = np.asarray(image, dtype=np.int16)
    labels, _ = ndimage.label(arr.max(axis=2) > threshold)
    out = np.full((len(atoms), 2), np.nan)
    for k, i in enumerate(atoms):
        u, v = screen[i]
        blob = labels[int(v), int(u)]
        if blob:
            ys, xs = np.nonzero(labels == blob)
            out[k] = xs.mean() + 0.5, ys.mean() + 0.5
    return out


def color_mask(image, rgb: tuple[int, int, int], min_brightness: int = 40, tol: float = 0.06) -> np.ndarray:
    """Pixels whose chromaticity (r, g, b)/(r + g + b) is that of ``rgb``: shading changes brightness, not hue."""
    arr = np.asarray(image, dtype=float)
    total = arr.sum(axis=2)
    chroma = arr / np.maximum(total, 1.0)[..., None]
    target = np.asarray(rgb, float) / sum(rgb)
    return (np.abs(chroma - target).max(axis=2) < tol) & (arr.max(axis=2) >= min_brightness)


@pytest.fixture(scope="module")
def ball_renderings(complex_6yqw, pymol_renderer):
    scenes = [as_isolated_balls(case_scene(complex_6yqw, v, c)) for v, c in CASES]
    return scenes, pymol_renderer.render_many(scenes, 512)


def test_vertical_fov_gives_30_degrees_across():
    assert vertical_fov(512, 512) == pytest.approx(30.0)
    assert vertical_fov(640, 400) < 30.0 < vertical_fov(400, 640)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_pymol_atom_centres_match_projection(ball_renderings, case):
    scenes, renderings = ball_renderings
    scene, rendering = scenes[case], renderings[case]
    screen, depth, radius, visible = project_scene(scene, Camera(512, 512))
    np.testing.assert_allclose(rendering.screen, screen)
    assert rendering.image.size == (512, 512) and rendering.renderer == "pymol"
    atoms = isolated_atoms(rendering, 512, 512)
    assert len(atoms) >= MIN_ISOLATED
    found = blob_centres(rendering.image, screen, atoms)
    assert not np.isnan(found).any(), "an atom's projected centre fell on background"
    err = np.linalg.norm(found - screen[atoms], axis=1)
    assert err.max() <= TOL_PX, f"{CASES[case]}: max {err.max():.2f} px"
    # each blob has its own atom's colour (catches atoms reordered inside PyMOL)
    classes = scene.color_classes()
    blobs, _ = ndimage.label(np.asarray(rendering.image).max(axis=2) > 12)
    masks = {c: color_mask(rendering.image, hex_to_rgb(HEX[c]), min_brightness=25) for c in set(classes)}
    for i in atoms:
        blob = blobs == blobs[int(screen[i, 1]), int(screen[i, 0])]
        share = masks[classes[i]][blob].mean()
        assert share > 0.5, f"atom {i} ({classes[i]}) has only {share:.0%} of its colour"
    # the measured atoms spread over the image: left/right and up/down both tested (no mirror flip passes)
    assert np.ptp(screen[atoms, 0]) > 150 and np.ptp(screen[atoms, 1]) > 150


def test_pymol_non_square_image_keeps_30_degrees_across(complex_6yqw, pymol_renderer):
    scene = as_isolated_balls(case_scene(complex_6yqw, "top", ""))
    rendering = pymol_renderer.render(scene, (640, 400))
    assert rendering.image.size == (640, 400)
    screen, _, radius, visible = project_scene(scene, Camera(640, 400))
    atoms = isolated_atoms(rendering, 640, 400)
    assert len(atoms) >= MIN_ISOLATED
    err = np.linalg.norm(blob_centres(rendering.image, screen, atoms) - screen[atoms], axis=1)
    assert err.max() <= TOL_PX


def test_raster_and_pymol_agree_on_positions_and_pixels(ball_renderings):
    scenes, renderings = ball_renderings
    raster = RasterRenderer(labels=False)
    for scene, pym in zip(scenes, renderings):
        ras = raster.render(scene, 512)
        np.testing.assert_allclose(ras.screen, pym.screen)
        np.testing.assert_array_equal(ras.visible, pym.visible)
        atoms = isolated_atoms(pym, 512, 512)
        a, b = blob_centres(ras.image, ras.screen, atoms), blob_centres(pym.image, pym.screen, atoms)
        assert len(atoms) >= MIN_ISOLATED and not np.isnan(a).any() and not np.isnan(b).any()
        assert np.linalg.norm(a - b, axis=1).max() <= TOL_PX


def test_raster_and_pymol_put_the_single_chlorine_in_the_same_place(complex_6yqw, pymol_renderer):
    """The real ball-and-stick ligand: its one Cl atom (the only green) is at the same spot in both images.

    Framed views only: zoomed in (``move z 50``) a ball is ~25 px wide and the raster's
    circle and PyMOL's true perspective ellipse legitimately differ by more than 2 px.
    """
    for view, commands in CASES[:3]:
        scene = case_scene(complex_6yqw, view, commands)
        ligand = scene.subset(scene.is_ligand)
        assert list(ligand.elements).count("CL") == 1
        pym = pymol_renderer.render(ligand, 512)
        ras = RasterRenderer(labels=False).render(ligand, 512)
        green = hex_to_rgb(HEX["CL"])
        centres = []
        for image in (pym.image, ras.image):
            ys, xs = np.nonzero(color_mask(image, green))
            assert len(xs) >= 10
            centres.append((xs.mean() + 0.5, ys.mean() + 0.5))
        cl = int(np.flatnonzero(ligand.elements == "CL")[0])
        assert np.linalg.norm(np.subtract(centres[0], centres[1])) <= TOL_PX
        # the green blob is the ball plus half a bond, which pulls its centroid a little off the atom
        assert np.linalg.norm(np.subtract(centres[0], pym.screen[cl])) <= TOL_PX + 0.15 * pym.radius_px[cl]


def test_pymol_image_shows_every_colour_class_and_labels(complex_6yqw, pymol_renderer):
    scene = scene_from_complex(complex_6yqw, "front")
    plain = pymol_renderer.render(scene, 512)
    pymol_renderer.labels = True
    try:
        labelled = pymol_renderer.render(scene, 512)
    finally:
        pymol_renderer.labels = False
    arr = np.asarray(plain.image, dtype=np.int16)
    assert (arr.max(axis=2) > 12).mean() > 0.05  # a pocket fills a good part of the picture
    assert tuple(arr[0, 0]) == (0, 0, 0)  # black background
    for cls in set(scene.color_classes()) - {"LIGAND_C"}:  # grey has no hue to test
        assert color_mask(plain.image, hex_to_rgb(HEX[cls])).sum() >= 5, cls
    changed = np.abs(np.asarray(labelled.image, np.int16) - arr).max(axis=2) > 60
    assert changed.sum() > 2000  # about fifty residue labels plus the ligand atom names
    assert color_mask(labelled.image, (255, 250, 200), min_brightness=200, tol=0.03).sum() > 300  # residue label colour


def test_pymol_is_deterministic(complex_6yqw, pymol_renderer):
    scene = case_scene(complex_6yqw, "left", "roll x 20")
    a, b = pymol_renderer.render_many([scene, scene], 256)
    assert a.png_bytes() == b.png_bytes()


def test_pymol_bad_input_is_one_line_error(complex_6yqw, pymol_renderer):
    scene = scene_from_complex(complex_6yqw, "front")
    with pytest.raises(MisiError, match="empty scene"):
        pymol_renderer.render(scene.subset(np.zeros(len(scene), bool)))
    with pytest.raises(MisiError, match="out of range"):
        pymol_renderer.render(scene, 2)
    behind = scene.apply("move z 500")  # everything behind the camera: nothing to see, not an error
    rendering = pymol_renderer.render(behind, 128)
    assert not rendering.visible.any()


def test_pymol_timeout_is_a_clear_error(complex_6yqw):
    scene = scene_from_complex(complex_6yqw, "front")
    with PyMOLRenderer(timeout=0.001) as renderer:
        with pytest.raises(PyMOLError, match="timed out") as info:
            renderer.render(scene, 512)
        assert "\n" not in str(info.value)
