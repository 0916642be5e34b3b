"""Geometric primitives against numpy / scipy references and textbook values."""
from __future__ import annotations

import math

import numpy as np
import pytest

from misi_agent.tools import geometry as g

RNG = np.random.default_rng(7)


def test_distance_and_angle_match_numpy_on_random_points():
    pts = RNG.normal(size=(50, 3, 3)) * 4.0
    for a, b, c in pts:
        assert g.distance(a, b) == pytest.approx(float(np.linalg.norm(a - b)))
        u, v = a - b, c - b
        ref = math.degrees(math.acos(np.dot(u, v) / np.linalg.norm(u) / np.linalg.norm(v)))
        assert g.angle(tuple(a), tuple(b), tuple(c)) == pytest.approx(ref, abs=1e-9)


def test_known_angles():
    assert g.angle((1, 0, 0), (0, 0, 0), (0, 1, 0)) == pytest.approx(90.0)
    assert g.angle((1, 0, 0), (0, 0, 0), (-1, 0, 0)) == pytest.approx(180.0)
    assert g.angle((1, 0, 0), (0, 0, 0), (1, 0, 0)) == pytest.approx(0.0)
    # a tetrahedral angle from the cube diagonals
    assert g.angle((1, 1, 1), (0, 0, 0), (1, -1, -1)) == pytest.approx(109.4712, abs=1e-3)
    # degenerate input returns 0 instead of raising
    assert g.angle((0, 0, 0), (0, 0, 0), (1, 0, 0)) == 0.0


def test_dihedral_signs_and_values():
    a, b, c = (1, 0, 0), (0, 0, 0), (0, 0, 1)
    assert g.dihedral(a, b, c, (1, 0, 1)) == pytest.approx(0.0, abs=1e-9)
    assert g.dihedral(a, b, c, (0, 1, 1)) == pytest.approx(90.0)
    assert g.dihedral(a, b, c, (0, -1, 1)) == pytest.approx(-90.0)
    assert abs(g.dihedral(a, b, c, (-1, 0, 1))) == pytest.approx(180.0)


def test_centroid_and_plane_projection():
    pts = RNG.normal(size=(20, 3))
    assert np.allclose(g.centroid(pts), pts.mean(axis=0))
    with pytest.raises(ValueError):
        g.centroid(np.zeros((0, 3)))
    n = g.plane_normal((0, 0, 0), (1, 0, 0), (1, 1, 0))
    assert n == pytest.approx((0, 0, 1))
    p = g.project_onto_plane((3.0, -2.0, 5.0), n, 1.0)
    assert p == pytest.approx((3.0, -2.0, 1.0))


def test_pairs_within_matches_brute_force():
    a = RNG.uniform(0, 20, size=(80, 3))
    b = RNG.uniform(0, 20, size=(60, 3))
    d = np.linalg.norm(a[:, None] - b[None], axis=2)
    ref = sorted((int(i), int(j)) for i, j in zip(*np.nonzero(d <= 4.0)))
    assert g.pairs_within(a, b, 4.0) == ref
    assert g.pairs_within(a, np.zeros((0, 3)), 4.0) == []
    assert g.within(b, a[0], 4.0) == [int(j) for j in np.flatnonzero(d[0] <= 4.0)]


def test_vector_helpers():
    assert g.cross((1, 0, 0), (0, 1, 0)) == (0, 0, 1)
    assert g.unit((0, 3, 4)) == pytest.approx((0, 0.6, 0.8))
    assert g.unit((0, 0, 0)) == (0.0, 0.0, 0.0)
    assert g.dot((1, 2, 3), (4, 5, 6)) == 32
