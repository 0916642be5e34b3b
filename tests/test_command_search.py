"""The geometric task solvers on task instances drawn from real fixtures by both renderers.

Instances are made the way the benchmark makes them: the translation case directly with
the command algebra (``Scene.apply`` = ``camera.apply_commands``) and a renderer, the others
with the benchmark's own item generators (:mod:`misi_agent.bench.task_geometry`,
:mod:`misi_agent.bench.task_hbonds`), which build every image from commands; the solvers
get only the images, the complex and what the question states. Also checked: the answer
spaces, a wrong structure making the tools unsure, bad input, and the agent's router
answering generated questions through the spatial provider. One PyMOL worker serves the module.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from misi_agent.bench import task_geometry as G
from misi_agent.bench import task_hbonds as H
from misi_agent.camera import Command
from misi_agent.render.pymol_backend import PyMOLRenderer
from misi_agent.render.raster import RasterRenderer
from misi_agent.scene import scene_from_complex
from misi_agent.structure import load_complex
from misi_agent.tools import geometric_tasks as S
from misi_agent.tools.command_search import move_roll_pairs, moves, roll_pairs, rolls

FIXTURES = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"
ENTRIES = (("6yqw", "82I"), ("7n4w", "P4V"), ("7f5d", "EUO"), ("7oeo", "V9Z"))


@pytest.fixture(scope="module")
def cxs():
    return [load_complex(FIXTURES / f"{p}.cif.gz", ligand=c) for p, c in ENTRIES]


@pytest.fixture(scope="module")
def pymol():
    r = PyMOLRenderer()
    yield r
    r.close()


def draw(spec, renderer):
    return [r.image for r in renderer.render_many([im.scene for im in spec.images])]


def bond_of(spec) -> dict:
    b = spec.params["bond"]
    return {"chain": b["chain"], "residue_name": b["residue_name"],
            "residue_number": f"{b['residue_number']}{b['insertion_code']}", "residue_atom": b["protein_atom"],
            "ligand_atom": b["ligand_atom"]}


def check(answer, gold: str) -> None:
    assert answer.answer == gold, answer.to_dict()
    assert answer.confident and answer.margin is not None and answer.margin > 0
    assert answer.runner_up != gold
    json.dumps(answer.to_dict())  # the record is plain JSON


def test_answer_spaces_follow_the_benchmark_grids():
    assert len(moves()) == 16 and {c.axis for c in moves()} == {"x", "y"}
    assert len(rolls()) == 36 and all(c.value % 15 == 0 and c.value != 0 for c in rolls())
    assert len(move_roll_pairs()) == 16 * 36
    pairs = roll_pairs()
    assert len(pairs) == 6 * 12 * 12 and all(a.axis != b.axis for a, b in pairs)


def test_translation_built_with_the_command_algebra(cxs):
    """T1 made by hand: the three views and the front view after `move a d`, for every axis and a few d."""
    ren = RasterRenderer()
    cx = cxs[1]
    views = [scene_from_complex(cx, v) for v in ("front", "left", "top")]
    for cmd in (Command("move", "x", -4.0), Command("move", "y", 1.0), Command("move", "x", 2.0)):
        images = [r.image for r in ren.render_many(views + [views[0].apply([cmd])])]
        check(S.solve_translation(images, cx), str(cmd))


@pytest.mark.parametrize("task", ["rotation", "zooming", "rotation_rotation", "translation_rotation", "docking",
                                  "interaction_location"])
def test_generated_items_raster(cxs, task):
    ren = RasterRenderer()
    for k, cx in enumerate(cxs[:3]):
        rng = np.random.default_rng([11, k])
        if task == "rotation":
            spec = G.rotation(cx, rng)
            got = S.solve_rotation(draw(spec, ren), cx)
        elif task == "zooming":
            spec = G.zooming(cx, rng)
            got = S.solve_zoom(draw(spec, ren), cx)
        elif task == "rotation_rotation":
            spec = G.rotation_rotation(cx, rng)
            got = S.solve_rotation_rotation(draw(spec, ren), cx)
            assert got.details["inferred_commands"] == spec.params["commands"]
        elif task == "translation_rotation":
            target = cxs[(k + 1) % len(cxs)]
            spec = G.translation_rotation(cx, target, rng)
            got = S.solve_translation_rotation(draw(spec, ren), cx, target)
            assert got.details["inferred_commands"] == spec.params["commands"]
        elif task == "docking":
            spec = G.docking(cx, rng)
            got = S.solve_docking(draw(spec, ren), cx)
        else:
            spec = H.interaction_location(cx, rng)
            got = S.locate_interaction(draw(spec, ren), cx, bond_of(spec), spec.options)
        check(got, spec.answer)


def test_generated_items_pymol(cxs, pymol):
    """One item of every task drawn by PyMOL (another look: its lighting, fog and label placement)."""
    cx, other = cxs[0], cxs[2]
    rng = lambda k: np.random.default_rng([13, k])  # noqa: E731
    spec = G.translation(other, rng(0))
    check(S.solve_translation(draw(spec, pymol), other), spec.answer)
    spec = G.rotation(cx, rng(1))
    check(S.solve_rotation(draw(spec, pymol), cx), spec.answer)
    spec = G.zooming(cx, rng(2))
    check(S.solve_zoom(draw(spec, pymol), cx), spec.answer)
    spec = G.rotation_rotation(other, rng(3))
    check(S.solve_rotation_rotation(draw(spec, pymol), other), spec.answer)
    spec = G.translation_rotation(cx, other, rng(4))
    check(S.solve_translation_rotation(draw(spec, pymol), cx, other), spec.answer)
    spec = G.docking(other, rng(5))
    check(S.solve_docking(draw(spec, pymol), other), spec.answer)
    spec = H.interaction_location(cx, rng(6))
    check(S.locate_interaction(draw(spec, pymol), cx, bond_of(spec), spec.options), spec.answer)


def test_wrong_structure_makes_the_tools_unsure(cxs):
    ren = RasterRenderer()
    spec = G.rotation(cxs[0], np.random.default_rng([5]))
    images = draw(spec, ren)
    got = S.solve_rotation(images, cxs[2])  # the question's images are of 6YQW; the structure is 7F5D's
    assert not got.confident
    assert got.residual > 6.0
    assert any("does not fit" in n for n in got.notes)
    assert not got.details["registrations"][0]["ok"]
    spec = G.rotation_rotation(cxs[1], np.random.default_rng([6]))
    got = S.solve_rotation_rotation(draw(spec, ren), cxs[3])
    assert not got.confident and any("does not fit" in n for n in got.notes)


def test_bad_input_is_one_line_errors(cxs):
    ren = RasterRenderer()
    spec = H.interaction_location(cxs[0], np.random.default_rng([1]))
    images = draw(spec, ren)
    with pytest.raises(S.SpatialTaskError, match="takes 4 images"):
        S.solve_translation(images[:3], cxs[0])
    bond = dict(bond_of(spec), residue_atom="XX9")
    with pytest.raises(S.SpatialTaskError, match="no pocket atom"):
        S.locate_interaction(images, cxs[0], bond, spec.options)
    with pytest.raises(S.SpatialTaskError, match="no atom"):
        S.locate_interaction(images, cxs[0], dict(bond_of(spec), ligand_atom="QQ1"), spec.options)
    with pytest.raises(S.SpatialTaskError, match="option"):
        S.locate_interaction(images, cxs[0], bond_of(spec), dict(spec.options, B="go left a bit"))


def test_router_answers_generated_questions_with_the_spatial_tools(tmp_path):
    """End to end: `bench generate` on the fixtures (256 px images), the router planner, the spatial provider."""
    from misi_agent.agent.loop import answer_question
    from misi_agent.agent.planners.router import RouterPlanner
    from misi_agent.agent.store import StructureStore
    from misi_agent.bench.question import read_questions
    from agent_support import generate

    path = generate(tmp_path / "set", "translation,rotation_rotation,docking", per_task=1, seed=3)
    questions = read_questions(path)
    assert len(questions) == 3
    for q in questions:
        result = answer_question(q, path.parent, RouterPlanner(), StructureStore(use_env=False))
        assert result.error in (None, ""), result.error
        assert result.answer == q.answer, (q.id, result.answer, q.answer)


def test_agent_tool_picks_the_ligand_the_picture_shows(cxs, tmp_path):
    """7X9K's largest ligand is 8DG; a code-less question whose pictures show 8OG's pocket gets 8OG,
    because the structure is registered to the first image before solving."""
    from misi_agent.agent.context import AgentContext
    from misi_agent.agent.registry import Registry
    from misi_agent.agent.store import StructureStore
    from misi_agent.tools.agent_tools import agent_tools

    cx = load_complex(FIXTURES / "7x9k.cif.gz", ligand="8OG")
    spec = G.translation(cx, np.random.default_rng([21]))
    paths = []
    for k, im in enumerate(draw(spec, RasterRenderer())):
        paths.append(tmp_path / f"{k + 1}.png")
        im.save(paths[-1])
    registry = Registry(agent_tools(AgentContext(paths, StructureStore(use_env=False))))
    res = registry.call("solve_translation", {"pdb_id": "7X9K", "images": [1, 2, 3, 4]})
    assert res.ok, res.error
    assert res.output["answer"] == spec.answer and res.output["confident"]
    assert res.output["ligand"]["code"] == "8OG" and "did not fit" in res.output["ligand"]["chosen_because"]
    reg = registry.call("register_structure", {"pdb_id": "7X9K", "image": 1})
    assert reg.ok and reg.output["ok"] and reg.output["ligand"]["code"] == "8OG"
    det = registry.call("detect_atoms", {"image": 4})
    assert det.ok and det.output["n_atoms"] > 3
    bad = registry.call("solve_translation", {"pdb_id": "7X9K", "images": [1, 2, 3]})
    assert not bad.ok and bad.error.startswith("invalid arguments")  # the contract's schema wants 4 images
