"""The command algebra, the camera and the six views, as properties over many random cases.

Random point sets, angles and distances come from fixed-seed numpy generators (no
hypothesis): each property runs on a few hundred cases in well under a second. The fit is
checked on every committed fixture in all six views.
"""
from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from misi_agent.camera import (
    ATOM_PAD,
    AXES,
    VIEW_COMMANDS,
    VIEW_NAMES,
    Camera,
    Command,
    CommandError,
    apply_command,
    apply_commands,
    compose_rigid,
    fit_distance,
    format_commands,
    initial_view,
    parse_commands,
    rotation_matrix,
    view_rotation,
)
from misi_agent.errors import MisiError

FIXTURES = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"
N_CASES = 200


def _points(rng: np.random.Generator, n: int | None = None) -> np.ndarray:
    """A random cloud (5–60 points, ~10 Å across) somewhere in front of the camera."""
    n = n or int(rng.integers(5, 60))
    return rng.normal(scale=rng.uniform(2, 10), size=(n, 3)) + np.array([rng.uniform(-5, 5), rng.uniform(-5, 5),
                                                                         -rng.uniform(40, 80)])


def _random_commands(rng: np.random.Generator, k: int) -> list[Command]:
    out = []
    for _ in range(k):
        if rng.random() < 0.5:
            out.append(Command("move", str(rng.choice(AXES)), float(rng.integers(-40, 41)) / 4))
        else:
            out.append(Command("roll", str(rng.choice(AXES)), float(rng.integers(-24, 25)) * 7.5))
    return out


# ----------------------------------------------------------------------------- algebra


def test_roll_then_inverse_roll_is_identity():
    rng = np.random.default_rng(0)
    for _ in range(N_CASES):
        pts = _points(rng)
        axis, angle = str(rng.choice(AXES)), float(rng.uniform(-180, 180))
        back = apply_commands(pts, [Command("roll", axis, angle), Command("roll", axis, -angle)])
        np.testing.assert_allclose(back, pts, atol=1e-9)
    pts = _points(rng)
    np.testing.assert_allclose(apply_commands(pts, "roll x 30, roll x -30"), pts, atol=1e-9)


def test_command_sequence_undone_by_reversed_inverses():
    rng = np.random.default_rng(1)
    for _ in range(N_CASES):
        pts = _points(rng)
        cmds = _random_commands(rng, int(rng.integers(1, 6)))
        inverse = [Command(c.op, c.axis, -c.value) for c in reversed(cmds)]
        np.testing.assert_allclose(apply_commands(apply_commands(pts, cmds), inverse), pts, atol=1e-8)


@pytest.mark.parametrize("axis,start,end", [("z", (1, 0, 0), (0, 1, 0)), ("x", (0, 1, 0), (0, 0, 1)),
                                            ("y", (0, 0, 1), (1, 0, 0))])
def test_roll_plus_90_follows_right_hand_rule(axis, start, end):
    np.testing.assert_allclose(rotation_matrix(axis, 90) @ np.array(start, float), end, atol=1e-12)
    about = np.array([2.0, -1.0, -30.0])
    np.testing.assert_allclose(apply_command(np.array([about + start]), Command("roll", axis, 90), center=about),
                               [about + np.array(end, float)], atol=1e-12)
    rng = np.random.default_rng(2)
    for _ in range(50):
        # A point offset along `start` from the centroid of a symmetric cloud ends up offset along `end`.
        core = _points(rng, 8)
        c = core.mean(axis=0)
        step = rng.uniform(1, 10)
        pts = np.vstack([core, c + step * np.array(start), c - step * np.array(start)])
        out = apply_commands(pts, [Command("roll", axis, 90)])
        np.testing.assert_allclose(out[-2] - out.mean(axis=0), step * np.array(end), atol=1e-9)
        np.testing.assert_allclose(out.mean(axis=0), pts.mean(axis=0), atol=1e-9)


def test_rolls_keep_centroid_and_distances_moves_translate():
    rng = np.random.default_rng(3)
    for _ in range(N_CASES):
        pts = _points(rng)
        (cmd,) = _random_commands(rng, 1)
        out = apply_commands(pts, [cmd])
        d0 = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
        np.testing.assert_allclose(np.linalg.norm(out[:, None] - out[None], axis=-1), d0, atol=1e-9)
        if cmd.op == "roll":
            np.testing.assert_allclose(out.mean(axis=0), pts.mean(axis=0), atol=1e-9)
        else:
            shift = np.zeros(3)
            shift[AXES.index(cmd.axis)] = cmd.value
            np.testing.assert_allclose(out - pts, np.broadcast_to(shift, pts.shape), atol=1e-12)


def test_roll_turns_about_centroid_of_moved_subset():
    """apply_commands(center_of=mask) turns about the centroid of the masked points (the ligand)."""
    rng = np.random.default_rng(4)
    for _ in range(50):
        pts = _points(rng, 30)
        mask = np.zeros(30, bool)
        mask[rng.choice(30, 8, replace=False)] = True
        out = apply_commands(pts, [Command("roll", "y", 40.0)], center_of=mask)
        np.testing.assert_allclose(out[mask].mean(axis=0), pts[mask].mean(axis=0), atol=1e-9)


def test_compose_rigid_equals_apply_commands():
    rng = np.random.default_rng(5)
    for _ in range(N_CASES):
        pts = _points(rng)
        cmds = _random_commands(rng, int(rng.integers(1, 7)))
        R, t = compose_rigid(cmds, pts.mean(axis=0))
        np.testing.assert_allclose(pts @ R.T + t, apply_commands(pts, cmds), atol=1e-8)
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
        assert np.linalg.det(R) == pytest.approx(1.0)
        text = format_commands(cmds)
        R2, t2 = compose_rigid(text, pts.mean(axis=0))
        np.testing.assert_allclose(R2, R, atol=1e-12)
        np.testing.assert_allclose(t2, t, atol=1e-12)


# ----------------------------------------------------------------------------- projection


def test_move_z_positive_makes_the_scene_larger():
    """Toward the viewer every atom moves away from the image centre (perspective) and a
    centred scene's projected size grows; away from the viewer it shrinks."""
    rng = np.random.default_rng(6)
    cam = Camera()
    centre = np.array([cam.width / 2, cam.height / 2])
    for _ in range(N_CASES):
        pts = initial_view(_points(rng), str(rng.choice(VIEW_NAMES)))
        d = float(-pts[:, 2].max())  # nearest atom's depth
        step = rng.uniform(0.5, 0.8 * (d - 1.0))
        before, _ = cam.project(pts)
        after, _ = cam.project(apply_commands(pts, [Command("move", "z", step)]))
        away, _ = cam.project(apply_commands(pts, [Command("move", "z", -step)]))
        r0, r1, r2 = (np.linalg.norm(uv - centre, axis=1) for uv in (before, after, away))
        assert np.all(r1 >= r0) and np.all(r2 <= r0)
        iu = np.triu_indices(len(pts), 1)
        size = lambda uv: np.linalg.norm(uv[:, None] - uv[None], axis=-1)[iu].mean()  # noqa: E731
        assert size(away) < size(before) < size(after)
        assert np.ptp(after, axis=0).max() > np.ptp(before, axis=0).max()


@pytest.mark.parametrize("axis,sign", [("x", 1), ("x", -1), ("y", 1), ("y", -1)])
def test_move_x_right_and_move_y_up_on_screen(axis, sign):
    rng = np.random.default_rng(7)
    cam = Camera(640, 480)
    col = 0 if axis == "x" else 1
    for _ in range(N_CASES):
        pts = _points(rng)
        d = sign * float(rng.uniform(0.5, 4.0))
        before, depth0 = cam.project(pts)
        after, depth1 = cam.project(apply_commands(pts, [Command("move", axis, d)]))
        np.testing.assert_array_equal(depth0, depth1)
        # Screen x grows to the right; screen y grows downwards, so "up" lowers it.
        change = after[:, col] - before[:, col]
        assert np.all(change * (sign if axis == "x" else -sign) > 0)
        np.testing.assert_allclose(change, (1 if axis == "x" else -1) * cam.focal * d / depth0)
        np.testing.assert_allclose(after[:, 1 - col], before[:, 1 - col])


def test_projection_formula_and_visibility():
    cam = Camera(512, 512)
    f = 256 / math.tan(math.radians(15))
    uv, depth = cam.project(np.array([[0.0, 0.0, -10.0], [1.0, 2.0, -20.0], [0.0, 0.0, 0.2]]))
    np.testing.assert_allclose(uv[0], [256, 256])
    np.testing.assert_allclose(uv[1], [256 + f / 20, 256 - 2 * f / 20])
    np.testing.assert_allclose(depth, [10, 20, -0.2])
    assert list(cam.visible(np.array([[0, 0, -10.0], [0, 0, -0.2], [0, 0, 3.0]]))) == [True, False, False]


# ----------------------------------------------------------------------------- parsing


def test_parse_format_round_trip():
    rng = np.random.default_rng(8)
    for _ in range(N_CASES):
        cmds = [Command(c.op, c.axis, round(c.value, 2)) for c in _random_commands(rng, int(rng.integers(1, 6)))]
        text = format_commands(cmds)
        assert parse_commands(text) == cmds
        assert format_commands(parse_commands(text)) == text
    assert parse_commands("roll x 30, move y -2") == [Command("roll", "x", 30.0), Command("move", "y", -2.0)]
    assert parse_commands("Rotate Y: 15°; translate z 2.5 Å\nturn x -45 degrees") == [
        Command("roll", "y", 15.0), Command("move", "z", 2.5), Command("roll", "x", -45.0)]
    assert format_commands([Command("move", "x", 3.0), Command("roll", "y", -7.5)]) == "move x 3, roll y -7.5"


@pytest.mark.parametrize("text,fragment", [
    ("roll w 30", "roll w 30"),
    ("move x", "move x"),
    ("spin x 3", "spin x 3"),
    ("move x 3 4", "move x 3 4"),
    ("roll x 30, jump", "jump"),
    ("roll x thirty", "roll x thirty"),
])
def test_malformed_commands_raise_one_line_errors(text, fragment):
    with pytest.raises(CommandError) as err:
        parse_commands(text)
    msg = str(err.value)
    assert isinstance(err.value, MisiError)
    assert "\n" not in msg and fragment in msg and "expected" in msg


@pytest.mark.parametrize("text", ["", "   ", ",,;"])
def test_empty_command_strings_raise(text):
    with pytest.raises(CommandError, match="empty"):
        parse_commands(text)


def test_unknown_axis_and_view_raise():
    with pytest.raises(CommandError):
        rotation_matrix("w", 10)
    with pytest.raises(CommandError, match="unknown view"):
        initial_view(np.zeros((3, 3)), "side")


# ----------------------------------------------------------------------------- views


def test_views_show_the_side_they_are_named_after():
    """front: +z nearest; left: the scene's −x side nearest with its +z on the right; top: +y
    nearest with the scene's front (+z) at the bottom; back/right/bottom the opposite sides."""
    rng = np.random.default_rng(9)
    nearest = {"front": (2, +1), "left": (0, -1), "top": (1, +1), "back": (2, -1), "right": (0, +1), "bottom": (1, -1)}
    for _ in range(N_CASES):
        world = _points(rng)
        for view, (col, sign) in nearest.items():
            v = initial_view(world, view)
            assert int(np.argmax(v[:, 2])) == int(np.argmax(sign * world[:, col])), view
        left, top = initial_view(world, "left"), initial_view(world, "top")
        assert int(np.argmax(left[:, 0])) == int(np.argmax(world[:, 2]))  # +z on the right
        assert int(np.argmin(top[:, 1])) == int(np.argmax(world[:, 2]))  # front at the bottom
        front = initial_view(world, "front")
        np.testing.assert_allclose(initial_view(world, "back"), apply_commands(front, "roll y 180"), atol=1e-9)
        for view in VIEW_NAMES:
            np.testing.assert_allclose(initial_view(world, view), apply_commands(front, list(VIEW_COMMANDS[view])),
                                       atol=1e-9)


def test_view_rotations_are_proper_and_distinct():
    mats = {v: view_rotation(v) for v in VIEW_NAMES}
    for v, m in mats.items():
        np.testing.assert_allclose(m @ m.T, np.eye(3), atol=1e-12)
        assert np.linalg.det(m) == pytest.approx(1.0)
    np.testing.assert_allclose(mats["front"], np.eye(3))
    np.testing.assert_allclose(mats["back"] @ mats["back"], np.eye(3), atol=1e-12)
    np.testing.assert_allclose(mats["left"] @ mats["right"], np.eye(3), atol=1e-12)
    np.testing.assert_allclose(mats["top"] @ mats["bottom"], np.eye(3), atol=1e-12)
    views = [tuple(np.round(m @ np.array([0, 0, 1.0]), 6)) for m in mats.values()]
    assert len(set(views)) == 6


def test_initial_view_centres_the_scene_at_the_fit_distance():
    rng = np.random.default_rng(10)
    for _ in range(50):
        world = _points(rng)
        d = fit_distance(world)
        for view in VIEW_NAMES:
            v = initial_view(world, view)
            np.testing.assert_allclose(v.mean(axis=0), [0, 0, -d], atol=1e-9)


@lru_cache(maxsize=None)
def _fixture_scenes():
    from misi_agent.scene import scene_from_complex
    from misi_agent.structure import load_complex

    with open(FIXTURES / "manifest.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for r in rows:
        cx = load_complex(FIXTURES / r["file"], r["ligand_ccd"] or None)
        out.append((r["pdb_id"], {v: scene_from_complex(cx, v) for v in VIEW_NAMES}))
    return out


@pytest.mark.parametrize("size", [(512, 512), (336, 336)])
def test_fit_every_fixture_in_every_view_stays_inside(size):
    """Every atom, with a ball of ATOM_PAD Å around it, projects inside the image in all six views."""
    cam = Camera(*size)
    for pid, scenes in _fixture_scenes():
        for view, scene in scenes.items():
            uv, depth = cam.project(scene.coords)
            assert np.all(cam.visible(scene.coords)), (pid, view)
            edge = np.minimum.reduce([uv[:, 0], size[0] - uv[:, 0], uv[:, 1], size[1] - uv[:, 1]])
            assert np.all(edge >= cam.pixel_radius(ATOM_PAD, depth)), (pid, view, float(edge.min()))
            # ... and the scene is not lost in the middle: it spans over half the image.
            assert np.ptp(uv[:, 0]) > 0.5 * size[0] or np.ptp(uv[:, 1]) > 0.5 * size[1], (pid, view)
