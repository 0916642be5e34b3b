"""Plain geometric primitives: distances, angles, dihedrals, planes, neighbour search.

Points are any sequences of three floats (tuples are fastest in the per-pair hot path of
the H-bond engine, where numpy's per-call overhead would dominate on 3-vectors); array
functions (:func:`centroid`, :func:`pairs_within`) take ``(n, 3)`` arrays.
Angles are in degrees.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy.spatial import cKDTree

Point = Sequence[float]
Vec = tuple[float, float, float]


def sub(a: Point, b: Point) -> Vec:
    """a − b."""
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def add(a: Point, b: Point) -> Vec:
    """a + b."""
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def scale(a: Point, s: float) -> Vec:
    """s · a."""
    return (a[0] * s, a[1] * s, a[2] * s)


def dot(a: Point, b: Point) -> float:
    """Scalar product."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a: Point, b: Point) -> Vec:
    """Vector product a × b."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def norm(a: Point) -> float:
    """Euclidean length."""
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


def unit(a: Point) -> Vec:
    """a / |a| (the zero vector stays zero)."""
    n = norm(a)
    if n == 0.0:
        return (0.0, 0.0, 0.0)
    return (a[0] / n, a[1] / n, a[2] / n)


def distance(a: Point, b: Point) -> float:
    """|a − b| in Å."""
    return norm(sub(a, b))


def angle(a: Point, b: Point, c: Point) -> float:
    """The angle a–b–c at ``b`` in degrees (0 when a or c coincides with b)."""
    u = sub(a, b)
    v = sub(c, b)
    nu, nv = norm(u), norm(v)
    if nu == 0.0 or nv == 0.0:
        return 0.0
    cos = dot(u, v) / (nu * nv)
    return math.degrees(math.acos(max(-1.0, min(1.0, cos))))


def dihedral(a: Point, b: Point, c: Point, d: Point) -> float:
    """The torsion a–b–c–d in degrees, in (−180, 180]."""
    b0 = sub(a, b)
    b1 = unit(sub(c, b))
    b2 = sub(d, c)
    v = sub(b0, scale(b1, dot(b0, b1)))
    w = sub(b2, scale(b1, dot(b2, b1)))
    x = dot(v, w)
    y = dot(cross(b1, v), w)
    return math.degrees(math.atan2(y, x))


def kabsch(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The proper rotation R and translation t with R·a + t ≈ b for the rows of ``A`` and ``B`` (n ≥ 3
    paired points, least squares; Kabsch). Apply to other points as ``X @ R.T + t``."""
    A = np.asarray(A, dtype=float)
    B = np.asarray(B, dtype=float)
    ca, cb = A.mean(axis=0), B.mean(axis=0)
    U, _, Vt = np.linalg.svd((A - ca).T @ (B - cb))
    d = np.sign(np.linalg.det(Vt.T @ U.T))
    R = Vt.T @ np.diag([1.0, 1.0, d]) @ U.T
    return R, cb - R @ ca


def centroid(points: np.ndarray) -> np.ndarray:
    """Mean position of an ``(n, 3)`` array (n ≥ 1)."""
    pts = np.asarray(points, dtype=float).reshape(-1, 3)
    if len(pts) == 0:
        raise ValueError("centroid of no points")
    return pts.mean(axis=0)


def plane_normal(p0: Point, p1: Point, p2: Point) -> Vec:
    """Unit normal of the plane through three points ((p1−p0) × (p2−p1))."""
    return unit(cross(sub(p1, p0), sub(p2, p1)))


def project_onto_plane(point: Point, normal: Point, offset: float = 0.0) -> Vec:
    """Orthogonal projection of ``point`` onto the plane {x : normal·x = offset} (unit normal)."""
    return sub(point, scale(normal, dot(normal, point) - offset))


def pairs_within(a: np.ndarray, b: np.ndarray, cutoff: float) -> list[tuple[int, int]]:
    """All (i, j) with |a[i] − b[j]| ≤ cutoff, sorted (a k-d tree over ``b``)."""
    a = np.asarray(a, dtype=float).reshape(-1, 3)
    b = np.asarray(b, dtype=float).reshape(-1, 3)
    if len(a) == 0 or len(b) == 0:
        return []
    tree = cKDTree(b)
    hits = tree.query_ball_point(a, r=cutoff)
    return sorted((i, int(j)) for i, js in enumerate(hits) for j in js)


def within(points: np.ndarray, center: Point, radius: float) -> list[int]:
    """Indices of ``points`` within ``radius`` of ``center``, ascending."""
    pts = np.asarray(points, dtype=float).reshape(-1, 3)
    if len(pts) == 0:
        return []
    d2 = ((pts - np.asarray(center, dtype=float)) ** 2).sum(axis=1)
    return [int(i) for i in np.flatnonzero(d2 <= radius * radius)]
