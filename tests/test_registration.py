"""Registration of real structures to images drawn by both renderers.

Checked: the benchmark framing is recovered (shift ≈ 0) with a small residual; a framing the
registration was not told about (the scene moved and pushed back before drawing) is measured
from the pixels alone; another entry's structure, or the right entry with another pocket,
does not fit and says so. One PyMOL worker serves the module.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from misi_agent.render.pymol_backend import PyMOLRenderer
from misi_agent.render.raster import RasterRenderer
from misi_agent.scene import scene_from_complex
from misi_agent.structure import load_complex
from misi_agent.tools.registration import ViewCamera, image_analysis, match_cost, register, scene_points

FIXTURES = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"


@pytest.fixture(scope="module")
def cx():
    return {pid: load_complex(FIXTURES / f"{pid}.cif.gz", ligand=code)
            for pid, code in (("6yqw", "82I"), ("7n4w", "P4V"), ("7f5d", "EUO"), ("7x9k", "8OG"))}


@pytest.fixture(scope="module")
def pymol():
    r = PyMOLRenderer()
    yield r
    r.close()


def renderers(pymol):
    return {"raster": RasterRenderer(), "pymol": pymol}


@pytest.mark.parametrize("name", ["raster", "pymol"])
def test_benchmark_framing_is_recovered(cx, pymol, name):
    ren = renderers(pymol)[name]
    for pid in ("6yqw", "7n4w"):
        for view in ("front", "top"):
            scene = scene_from_complex(cx[pid], view)
            rec, cam = register(scene, ren.render(scene).image)
            assert rec.ok, (name, pid, view, rec.to_dict())
            assert np.abs(rec.shift).max() < 0.3, (name, pid, view, rec.shift)
            assert rec.residual_px < 6.0 and rec.explained > 0.9 and rec.matched > 0.3  # labels hide atoms too
            assert rec.n_atoms_in_image == int(np.sum(ren.render(scene).visible)) or rec.n_atoms_in_image > 300


@pytest.mark.parametrize("name", ["raster", "pymol"])
def test_unknown_framing_is_measured_from_pixels(cx, pymol, name):
    """The image shows the scene moved by (2, -1.5) Å and 12 Å further away; registration of the
    unmoved scene finds that shift (the camera's place), with a good fit."""
    ren = renderers(pymol)[name]
    scene = scene_from_complex(cx["7f5d"], "front")
    image = ren.render(scene.apply("move x 2, move y -1.5, move z -12")).image
    rec, cam = register(scene, image)
    assert rec.ok
    assert np.allclose(rec.shift, (2.0, -1.5, -12.0), atol=0.35), rec.shift
    assert rec.residual_px < 4.0
    assert any("framing differs" in n for n in rec.notes)


def test_wrong_structure_does_not_fit(cx, pymol):
    for ren in renderers(pymol).values():
        image = ren.render(scene_from_complex(cx["6yqw"], "front")).image
        for other in ("7n4w", "7f5d"):
            rec, _ = register(scene_from_complex(cx[other], "front"), image, correspondences=False)
            assert not rec.ok, (other, rec.to_dict())
            assert rec.residual_px > 6.0 and rec.matched < 0.25 and rec.explained < 0.35
            assert any("poor fit" in n for n in rec.notes)


def test_another_ligand_of_the_same_entry_does_not_fit(cx):
    """7X9K holds 8OG and 8DG in one pocket region: the 8DG complex (another pocket) must not pass for 8OG's image."""
    other = load_complex(FIXTURES / "7x9k.cif.gz", ligand="8DG")
    image = RasterRenderer().render(scene_from_complex(cx["7x9k"], "front")).image
    good, _ = register(scene_from_complex(cx["7x9k"], "front"), image)
    bad, _ = register(scene_from_complex(other, "front"), image)
    assert good.ok and good.chamfer_px < bad.chamfer_px - 1.0
    assert not bad.ok


def test_ligand_correspondences_name_the_atoms_seen(cx):
    scene = scene_from_complex(cx["7n4w"], "left")
    rend = RasterRenderer().render(scene)
    rec, cam = register(scene, rend.image)
    assert len(rec.correspondences) >= 10
    for c in rec.correspondences:
        assert scene.is_ligand[c.atom_index] and scene.atom_names[c.atom_index] == c.atom_name
        # the matched atom is where the renderer says it is, within a few pixels of the ball found
        assert np.hypot(*(rend.screen[c.atom_index] - cam.project(scene.coords[[c.atom_index]])[0][0])) < 1.0
        assert c.distance_px < 4.0


def test_chamfer_cost_grows_with_misplacement(cx):
    scene = scene_from_complex(cx["6yqw"], "front")
    image = RasterRenderer().render(scene).image
    an = image_analysis(image)
    sp = scene_points(scene)
    cam = ViewCamera(an.width, an.height)
    costs = [match_cost(an, sp.moved([]), cam.with_shift((dx, 0.0, 0.0))).cost for dx in (0.0, 0.5, 1.0, 2.0, 4.0)]
    assert costs == sorted(costs) and costs[0] < 3.0 and costs[-1] > 6.0
    # nothing in front of the camera: the cost is the truncation
    far = replace(sp, points=sp.points + np.array([0, 0, 500.0]))
    assert match_cost(an, far, cam).cost == pytest.approx(10.0)


def test_record_is_plain_json(cx):
    import json

    scene = scene_from_complex(cx["6yqw"], "front")
    rec, _ = register(scene, RasterRenderer().render(scene).image)
    d = json.loads(json.dumps(rec.to_dict()))
    assert d["ok"] is True and len(d["shift"]) == 3 and d["fov_deg"] == 30.0
