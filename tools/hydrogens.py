"""Hydrogen positions for H-bond tests: explicit ones, or placed where heavy atoms fix them.

Without explicit hydrogens, ChimeraX places a hydrogen only where the heavy atoms
determine its position: a planar atom with two heavy neighbours (one H on the
anti-bisector), a planar atom with one planar heavy neighbour (two H in the neighbour's
plane, e.g. Asn ND2, Arg NH1), a tetrahedral atom with no lone pair and two or three heavy
neighbours (N3+ of a secondary/tertiary ammonium). Rotatable groups (OH, NH3+, SH) get no
hydrogen: their θ tests pass by default and θ/τ donors among them fail.

:class:`ExplicitHydrogens` carries real hydrogens (e.g. from a protonated pocket) as a
mapping heavy-atom index → ``(k, 3)`` coordinates; explicit hydrogens always win.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from misi_agent.errors import MisiError
from misi_agent.tools.geometry import Point, Vec, add, cross, dot, norm, scale, sub, unit

SINGLE, LINEAR, PLANAR, TETRAHEDRAL = 1, 2, 3, 4
_TET_HALF = math.radians(109.47 / 2.0)
_PLANAR_120 = math.radians(120.0)


class HydrogenError(MisiError):
    """Explicit hydrogens that cannot be used (bad shapes, unknown atoms)."""


@dataclass(frozen=True)
class ExplicitHydrogens:
    """Explicit hydrogen coordinates bonded to heavy atoms.

    ``pocket`` maps an index into ``cx.pocket`` and ``ligand`` an index into ``cx.ligand``
    to a ``(k, 3)`` array of the hydrogens bonded to that heavy atom. A side given as a
    mapping is taken as completely protonated (an atom absent from it has no hydrogen);
    a side left ``None`` keeps the heavy-atom behaviour (hydrogens placed where determined).
    """

    pocket: Mapping[int, np.ndarray] | None = None
    ligand: Mapping[int, np.ndarray] | None = None
    _frozen: dict = field(default_factory=dict, repr=False, compare=False)

    def side(self, name: str) -> dict[int, tuple[Vec, ...]] | None:
        """The hydrogens of ``"pocket"`` or ``"ligand"`` as tuples of points, or None."""
        if name in self._frozen:
            return self._frozen[name]
        raw = self.pocket if name == "pocket" else self.ligand
        out = None
        if raw is not None:
            out = {}
            for k, v in raw.items():
                arr = np.asarray(v, dtype=float)
                if arr.size == 0:
                    out[int(k)] = ()
                    continue
                if arr.ndim == 1:
                    arr = arr.reshape(1, -1)
                if arr.ndim != 2 or arr.shape[1] != 3 or not np.all(np.isfinite(arr)):
                    raise HydrogenError(f"explicit hydrogens of {name} atom {k}: expected a (k, 3) array of finite coordinates")
                out[int(k)] = tuple(tuple(float(x) for x in row) for row in arr)
        self._frozen[name] = out
        return out


def bond_positions(center: Point, geometry: int, bond_length: float, bonded: Sequence[Point],
                   coplanar: Sequence[Point] | None = None) -> list[Vec]:
    """Free substituent positions of ``center`` for ``geometry`` given the ``bonded`` ones.

    Only determined positions are returned: planar with two bonded (anti-bisector), planar
    with one bonded and a coplanar reference (±120° in that plane), tetrahedral with two
    (two positions) or three bonded (one), linear with one (opposite). Anything else is
    undetermined and returns ``[]``.
    """
    n = len(bonded)
    units = [unit(sub(b, center)) for b in bonded]
    if geometry == LINEAR and n == 1:
        return [add(center, scale(units[0], -bond_length))]
    if geometry == PLANAR:
        if n == 2:
            d = unit(scale(add(units[0], units[1]), -1.0))
            if norm(d) == 0.0:
                return []
            return [add(center, scale(d, bond_length))]
        if n == 1 and coplanar:
            b = units[0]
            # in-plane direction perpendicular to the bond, from the coplanar reference(s)
            ref = (0.0, 0.0, 0.0)
            for i, c in enumerate(coplanar[:2]):
                r = sub(c, bonded[0])
                r = sub(r, scale(b, dot(r, b)))
                ref = add(ref, scale(unit(r), 1.0 if i == 0 else -1.0))
            p = unit(ref)
            if norm(p) == 0.0:
                return []
            c120, s120 = math.cos(_PLANAR_120), math.sin(_PLANAR_120)
            return [add(center, scale(add(scale(b, c120), scale(p, s120)), bond_length)),
                    add(center, scale(add(scale(b, c120), scale(p, -s120)), bond_length))]
        return []
    if geometry == TETRAHEDRAL:
        if n == 3:
            d = unit(scale(add(add(units[0], units[1]), units[2]), -1.0))
            if norm(d) == 0.0:
                return []
            return [add(center, scale(d, bond_length))]
        if n == 2:
            d = unit(scale(add(units[0], units[1]), -1.0))
            c = unit(cross(units[0], units[1]))
            if norm(d) == 0.0 or norm(c) == 0.0:
                return []
            ca, sa = math.cos(_TET_HALF), math.sin(_TET_HALF)
            return [add(center, scale(add(scale(d, ca), scale(c, sa)), bond_length)),
                    add(center, scale(add(scale(d, ca), scale(c, -sa)), bond_length))]
    return []


def placed_hydrogens(center: Point, geometry: int, substituents: int, bond_length: float,
                     heavy_neighbors: Sequence[Point], coplanar: Sequence[Point] | None) -> list[Vec]:
    """Hydrogens fixed by the heavy atoms (ChimeraX ``hyd_positions`` without explicit H).

    ``geometry``/``substituents`` come from the atom's IDATM type. Returns ``[]`` when the
    hydrogen count or direction is undetermined (rotatable groups, atoms with lone pairs).
    """
    known = len(heavy_neighbors)
    if known >= substituents or known == 0:
        return []
    if known == 1 and geometry == TETRAHEDRAL:
        return []  # a rotor: the H could be anywhere on the cone
    if geometry - substituents > 0:
        return []  # a lone pair shares the free positions
    return bond_positions(center, geometry, bond_length, heavy_neighbors, coplanar)


def substituent_positions(center: Point, geometry: int, bond_length: float, hydrogens: Sequence[Point],
                          heavy_neighbors: Sequence[Point], coplanar: Sequence[Point] | None) -> list[Vec]:
    """Hydrogens plus lone-pair directions of an atom (ChimeraX ``hyd_positions(include_lone_pairs)``).

    Used by the τ test on the donor's heavy neighbour.
    """
    hyds = list(hydrogens)
    known = len(hyds) + len(heavy_neighbors)
    if known >= geometry or known == 0:
        return hyds
    if known == 1 and geometry == TETRAHEDRAL:
        return hyds
    return hyds + bond_positions(center, geometry, bond_length, list(hyds) + list(heavy_neighbors), coplanar)


def lone_pairs(center: Point, bonded: Sequence[Point]) -> list[Vec]:
    """Tetrahedral lone-pair directions (unit length) of an sp3 acceptor with 2 or 3 bonded atoms."""
    return bond_positions(center, TETRAHEDRAL, 1.0, bonded)


def hydrogens_from_protonated(heavy, protonated,
                              max_bond: float = 1.35) -> dict[int, np.ndarray]:
    """Map the hydrogens of ``protonated`` onto the heavy atoms of ``heavy``.

    ``heavy`` and ``protonated`` are biotite AtomArrays. Residues are matched by (chain,
    residue number, insertion code); each hydrogen goes to the nearest heavy atom of its residue within ``max_bond`` Å. Every heavy atom
    gets an entry (possibly empty), so the result describes a completely protonated side,
    ready for :class:`ExplicitHydrogens`.
    """
    elements = np.char.upper(protonated.element.astype(str))
    is_h = np.isin(elements, ["H", "D"])
    key = lambda arr, i: (str(arr.chain_id[i]), int(arr.res_id[i]), str(arr.ins_code[i]))
    by_res: dict[tuple, list[int]] = {}
    for i in range(heavy.array_length()):
        by_res.setdefault(key(heavy, i), []).append(i)
    out: dict[int, list] = {i: [] for i in range(heavy.array_length())}
    for h in np.flatnonzero(is_h):
        rk = key(protonated, h)
        cands = by_res.get(rk, [])
        if not cands:
            continue
        d = np.linalg.norm(heavy.coord[cands] - protonated.coord[h], axis=1)
        j = int(np.argmin(d))
        if d[j] <= max_bond:
            out[cands[j]].append(protonated.coord[h].astype(float))
    return {i: (np.array(v, dtype=float).reshape(-1, 3)) for i, v in out.items()}
