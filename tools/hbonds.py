"""ChimeraX-compatible hydrogen bonds between a pocket and its ligand.

MiSI-Bench's ground truth is ChimeraX's ``hbonds`` with relaxed criteria (Mills & Dean 1996
plus 0.4 Å / 20°). This engine re-implements that logic over explicit knowledge:

1. type both sides (:mod:`misi_agent.tools.atom_typing`): every polar atom gets donor
   and/or acceptor groups, ids of ``knowledge/hbond_criteria.yaml``;
2. find donor–acceptor candidates with a k-d tree;
3. a pair is an H-bond when the ACCEPTOR group's test (syn/anti, φ/ψ, θ/τ or generic) and
   the DONOR group's test (υ/τ, θ/τ or generic, with the parameter set of the acceptor's
   class) both pass, and no metal near the acceptor conflicts (D–A–M angle < 45°).

Hydrogens are explicit when given (:class:`ExplicitHydrogens`), else placed only where the
heavy atoms fix them (:mod:`misi_agent.tools.hydrogens`). Every test is a pure function of
coordinates (``check_*``), so each criterion can be tested on constructed geometry.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from misi_agent.errors import MisiError
from misi_agent.knowledge import KnowledgeError
from misi_agent.knowledge.hbonds import HBondCriteria, ResolvedCriteria, load_criteria, load_templates
from misi_agent.structure import METALS, Complex
from misi_agent.tools.atom_typing import TypedSide, type_ligand, type_pocket
from misi_agent.tools.geometry import (Point, Vec, angle, cross, distance, dot, norm, pairs_within,
                                       plane_normal, project_onto_plane, scale, sub, unit)
from misi_agent.tools.hydrogens import (ExplicitHydrogens, lone_pairs, placed_hydrogens,
                                        substituent_positions)

MODES = ("relaxed", "strict")
ANGLE_KEYS = ("theta", "phi", "upsilon", "tau")


class HBondError(MisiError):
    """Bad request to the H-bond engine (unknown mode, unusable criteria or hydrogens)."""


@dataclass(frozen=True)
class HBond:
    """One pocket–ligand hydrogen bond.

    ``donor`` says which side donates ("protein" or "ligand"); ``distance`` is D···A,
    ``h_distance`` H···A for the closest known hydrogen (None without one). ``angles``
    holds theta (D–H···A), phi, upsilon, tau as measured by the tests that applied (None
    where not applicable). ``group`` names the criteria rows that accepted the bond
    (``donor_group/acceptor_group``). Indices refer to ``cx.pocket`` and ``cx.ligand``.
    """

    residue_name: str
    residue_number: int
    insertion_code: str
    chain: str
    protein_atom: str
    ligand_atom: str
    donor: str
    donor_atom: str
    acceptor_atom: str
    distance: float
    h_distance: float | None
    angles: Mapping[str, float | None] = field(compare=False, hash=False)
    group: str
    donor_group: str
    acceptor_group: str
    protein_index: int
    ligand_index: int

    @property
    def residue_label(self) -> str:
        """``ARG 45`` (insertion code appended)."""
        return f"{self.residue_name} {self.residue_number}{self.insertion_code}"

    @property
    def pair_key(self) -> tuple[str, int, str, str, str, str]:
        """(chain, number, insertion code, residue, protein atom, ligand atom): direction-free identity."""
        return (self.chain, self.residue_number, self.insertion_code, self.residue_name,
                self.protein_atom, self.ligand_atom)


@dataclass(frozen=True)
class Check:
    """Outcome of one geometric test: pass/fail and what was measured."""

    ok: bool
    theta: float | None = None
    phi: float | None = None
    upsilon: float | None = None
    tau: float | None = None
    h_distance: float | None = None


FAIL = Check(False)


# ----------------------------------------------------------------------------- pure tests


def theta_test(d: Point, hyds: Sequence[Point], a: Point, theta_min: float) -> tuple[bool, float | None]:
    """θ = D–H···A: passes when any hydrogen reaches ``theta_min``; no hydrogen passes by default."""
    if not hyds:
        return True, None
    best = max(angle(a, h, d) for h in hyds)
    return best >= theta_min, best


def phi_angle(d: Point, a: Point, base: Point, plane: Sequence[Point] | None) -> float | None:
    """φ: base–A···D with base, A and D projected into ``plane`` (None when no plane is defined)."""
    if plane is None:
        return None
    normal = plane_normal(plane[0], plane[1], plane[2])
    if norm(normal) == 0.0:
        return None
    off = dot(normal, plane[1])
    return angle(project_onto_plane(base, normal, off), project_onto_plane(a, normal, off),
                 project_onto_plane(d, normal, off))


def check_phi_psi(d: Point, hyds: Sequence[Point], a: Point, base: Point | None, plane: Sequence[Point] | None,
                  params: Mapping[str, float], extra_distance: float = 0.0) -> Check:
    """Acceptor φ/ψ test: D···A ≤ distance, φ ≥ phi_min (if a plane exists), θ ≥ theta_min."""
    if distance(d, a) > params["distance"] + extra_distance:
        return FAIL
    phi = phi_angle(d, a, base, plane) if base is not None else None
    if phi is not None and phi < params["phi_min"]:
        return Check(False, phi=phi)
    ok, theta = theta_test(d, hyds, a, params["theta_min"])
    return Check(ok, theta=theta, phi=phi)


def is_syn(d: Point, a: Point, plane_atom: Point, syn_atom: Point) -> bool:
    """True when D lies on the syn atom's side of the A–plane-atom axis (ChimeraX's look-at test)."""
    axis = unit(sub(a, plane_atom))
    up = sub(syn_atom, plane_atom)
    up = sub(up, scale(axis, dot(up, axis)))
    return dot(sub(d, a), up) > 0.0


def check_syn_anti(d: Point, hyds: Sequence[Point], a: Point, syn_atom: Point, plane_atom: Point,
                   syn: Mapping[str, float], anti: Mapping[str, float], extra_distance: float = 0.0) -> Check:
    """Carboxylate/amide-type acceptor: φ/ψ test with syn or anti parameters by the donor's side."""
    params = syn if is_syn(d, a, plane_atom, syn_atom) else anti
    return check_phi_psi(d, hyds, a, plane_atom, (a, plane_atom, syn_atom), params, extra_distance)


def check_acceptor_theta_tau(d: Point, hyds: Sequence[Point], a: Point, up_points: Sequence[Point],
                             params: Mapping[str, float], extra_distance: float = 0.0) -> Check:
    """Acceptor θ/τ test: D···A, υ = partner–A···D in [upsilon_min, upsilon_max], θ.

    ``up_points`` is the partner atom, or the lone-pair bisectors (any may pass); an empty
    list leaves υ undetermined (passes).
    """
    if distance(d, a) > params["distance"] + extra_distance:
        return FAIL
    best = FAIL
    for up in (up_points or [None]):
        ups = angle(up, a, d) if up is not None else None
        if ups is not None and not params["upsilon_min"] <= ups <= params["upsilon_max"]:
            best = Check(False, upsilon=ups)
            continue
        ok, theta = theta_test(d, hyds, a, params["theta_min"])
        res = Check(ok, theta=theta, upsilon=ups)
        if ok:
            return res
        best = res
    return best


def check_acceptor_generic(d: Point, a: Point, bonded: Sequence[Point], params: Mapping[str, float],
                           extra_distance: float = 0.0) -> Check:
    """Generic acceptor: D···A ≤ distance and every bonded–A···D angle ≥ angle_min."""
    if distance(d, a) > params["distance"] + extra_distance:
        return FAIL
    worst = None
    for b in bonded:
        ang = angle(b, a, d)
        worst = ang if worst is None else min(worst, ang)
        if ang < params["angle_min"]:
            return Check(False, upsilon=ang)
    return Check(True, upsilon=worst)


def tau_test(d: Point, a: Point, heavy: Point, refs: Sequence[Point], tau_min: float | None,
             tau_max: float | None) -> tuple[bool, float | None]:
    """τ: angles between A and each substituent ``ref`` projected along the D–heavy axis.

    ``tau_min``: every substituent at least that far (staggered); ``tau_max``: some
    substituent within that angle (in plane). No limit or no reference passes.
    """
    if (tau_min is None and tau_max is None) or not refs:
        return True, None
    normal = unit(sub(heavy, d))
    pa = project_onto_plane(a, normal)
    pd = project_onto_plane(d, normal)
    angs = [angle(pa, pd, project_onto_plane(r, normal)) for r in refs]
    lowest = min(angs)
    if tau_min is not None:
        return lowest >= tau_min, lowest
    return lowest <= tau_max, lowest


def check_donor_upsilon_tau(d: Point, hyds: Sequence[Point], heavy: Point, a: Point, params: Mapping[str, float],
                            tau_refs: Sequence[Point] | None, acceptor_lone_pairs: Sequence[Point] | None = None,
                            extra_distance: float = 0.0) -> Check:
    """Donor υ/τ test: D···A, υ = heavy–D···A in range, θ (if H known), τ.

    ``tau_refs`` None means the τ symmetry could not be matched (the pair is rejected, as
    in ChimeraX). ``acceptor_lone_pairs`` (sp3 N acceptors) must offer one lone pair
    pointing at the donor (lone_pair_upsilon_min).
    """
    if distance(d, a) > params["distance"] + extra_distance:
        return FAIL
    lp_min = params.get("lone_pair_upsilon_min")
    if lp_min is not None and acceptor_lone_pairs:
        if not any(angle(sub(scale(a, 2.0), lp), a, d) >= lp_min for lp in acceptor_lone_pairs):
            return FAIL
    ups = angle(heavy, d, a)
    if not params["upsilon_min"] <= ups <= params["upsilon_max"]:
        return Check(False, upsilon=ups)
    ok, theta = theta_test(d, hyds, a, params["theta_min"])
    if not ok:
        return Check(False, theta=theta, upsilon=ups)
    tmin, tmax = params.get("tau_min"), params.get("tau_max")
    if tmin is None and tmax is None:
        return Check(True, theta=theta, upsilon=ups)
    if tau_refs is None:
        return Check(False, theta=theta, upsilon=ups)
    ok, tau = tau_test(d, a, heavy, tau_refs, tmin, tmax)
    return Check(ok, theta=theta, upsilon=ups, tau=tau)


def check_donor_theta_tau(d: Point, hyds: Sequence[Point], a: Point, params: Mapping[str, float],
                          acceptor_phi: tuple[Point, Sequence[Point]] | None = None,
                          acceptor_lone_pairs: Sequence[Point] | None = None,
                          extra_distance: float = 0.0) -> Check:
    """Donor θ/τ test (planar NH): needs a hydrogen; H···A ≤ h_distance and θ ≥ theta_min.

    ``acceptor_phi`` (base, plane) adds the φ test of sp3 O / planar N acceptors with two
    bonds; ``acceptor_lone_pairs`` the lone-pair test of sp3 N acceptors.
    """
    if not hyds:
        return FAIL
    hd = min(distance(h, a) for h in hyds)
    if hd > params["h_distance"] + extra_distance:
        return Check(False, h_distance=hd)
    phi = None
    if "phi_min" in params and acceptor_phi is not None:
        phi = phi_angle(d, a, acceptor_phi[0], acceptor_phi[1])
        if phi is not None and phi < params["phi_min"]:
            return Check(False, phi=phi, h_distance=hd)
    if "lone_pair_angle_min" in params and acceptor_lone_pairs:
        if not any(angle(d, a, sub(scale(a, 2.0), lp)) > params["lone_pair_angle_min"] for lp in acceptor_lone_pairs):
            return Check(False, h_distance=hd)
    ok, theta = theta_test(d, hyds, a, params["theta_min"])
    return Check(ok, theta=theta, phi=phi, h_distance=hd)


def check_donor_generic(d: Point, hyds: Sequence[Point], heavy_neighbors: Sequence[Point], a: Point,
                        params: Mapping[str, float], theta_min: float, bonded_angle_min: float,
                        extra_distance: float = 0.0) -> Check:
    """Generic donor: H···A < h_distance (or D···A ≤ distance without H), bonded–D···A, θ."""
    hd = None
    if hyds:
        hd = min(distance(h, a) for h in hyds)
        if hd >= params["h_distance"] + extra_distance:
            return Check(False, h_distance=hd)
    elif distance(d, a) > params["distance"] + extra_distance:
        return FAIL
    worst = None
    for b in heavy_neighbors:
        ang = angle(b, d, a)
        worst = ang if worst is None else min(worst, ang)
        if ang < bonded_angle_min:
            return Check(False, upsilon=ang, h_distance=hd)
    ok, theta = theta_test(d, hyds, a, theta_min)
    return Check(ok, theta=theta, upsilon=worst, h_distance=hd)


# ----------------------------------------------------------------------------- orchestration


def acceptor_class(element: str, idatm: str, atom_types: Mapping[str, tuple[int, int]]) -> str | None:
    """Which donor parameter set applies: sp2_O, sp3_O (or planar N), sp3_N or other (None: untyped)."""
    if idatm not in atom_types:
        return None
    geom = atom_types[idatm][0]
    if element == "O" and geom == 3:
        return "sp2_O"
    if (element == "O" and geom == 4) or (element == "N" and geom == 3):
        return "sp3_O"
    if element == "N" and geom == 4:
        return "sp3_N"
    return "other"


class _Engine:
    """Per-complex state: typed sides, caches of hydrogens and metal neighbours."""

    def __init__(self, pocket: TypedSide, ligand: TypedSide, R: ResolvedCriteria, metals: np.ndarray):
        self.sides = {"pocket": pocket, "ligand": ligand}
        self.R = R
        self.types = load_templates().atom_types
        self.metals = [tuple(map(float, m)) for m in metals]
        self._hyds: dict[tuple[str, int], list[Vec]] = {}
        self._metal_near: dict[tuple[str, int], list[Vec]] = {}

    # -- hydrogens
    def hydrogens(self, side: TypedSide, i: int) -> list[Vec]:
        key = (side.side, i)
        if key not in self._hyds:
            if side.hydrogens is not None:
                self._hyds[key] = list(side.explicit_h(i))
            else:
                self._hyds[key] = self._placed(side, i)
        return self._hyds[key]

    def _placed(self, side: TypedSide, i: int) -> list[Vec]:
        t = self.types.get(side.types[i])
        if t is None:
            return []
        geom, subs = t
        bonded = [side.xyz[j] for j in side.neighbors[i]]
        coplanar = self._coplanar(side, i)
        length = self.R.hydrogen_bond_lengths.get(side.elements[i], 1.0)
        return placed_hydrogens(side.xyz[i], geom, subs, length, bonded, coplanar)

    def _coplanar(self, side: TypedSide, i: int) -> list[Vec]:
        out = []
        for j in side.neighbors[i]:
            tj = self.types.get(side.types[j])
            if tj is None or tj[0] != 3:
                continue
            out += [side.xyz[k] for k in side.neighbors[j] if k != i]
        return out

    def tau_refs(self, side: TypedSide, i: int, symmetry: int, hyds: list[Vec]) -> list[Vec] | None:
        """Substituent positions for the τ test, or None when the symmetry does not match."""
        refs: list[Vec] = list(hyds) if symmetry == 4 else []
        heavy = side.neighbors[i]
        if 2 * len(refs) != symmetry:
            h0 = heavy[0]
            t = self.types.get(side.types[h0])
            if t is None:
                return []
            length = self.R.hydrogen_bond_lengths.get(side.elements[h0], 1.0)
            refs = substituent_positions(side.xyz[h0], t[0], length, side.explicit_h(h0),
                                         [side.xyz[k] for k in side.neighbors[h0]], self._coplanar(side, h0))
            refs += [side.xyz[k] for k in side.neighbors[h0] if k != i]
            if not refs:
                return []
        if 2 * len(refs) != symmetry:
            return None
        return refs

    def metal_neighbors(self, side: TypedSide, i: int) -> list[Vec]:
        key = (side.side, i)
        if key not in self._metal_near:
            r = self.R.metal_radius
            self._metal_near[key] = [m for m in self.metals if distance(m, side.xyz[i]) <= r]
        return self._metal_near[key]

    def lone_pairs(self, side: TypedSide, i: int) -> list[Vec]:
        bonded = side.bonded_xyz(i)
        if len(bonded) < 2:
            return []
        return lone_pairs(side.xyz[i], bonded)

    # -- the two halves of a test
    def acceptor_check(self, acc: TypedSide, ai: int, don: TypedSide, di: int, hyds: list[Vec]) -> Check:
        site = acc.acceptors[ai]
        g = self.R.acceptors[site.group]
        d, a = don.xyz[di], acc.xyz[ai]
        extra = self.R.sulfur_distance if don.elements[di] == "S" else 0.0
        if g.test == "syn_anti":
            return check_syn_anti(d, hyds, a, acc.xyz[site.syn], acc.xyz[site.plane], g.params["syn"],
                                  g.params["anti"], extra)
        p = g.params["params"]
        if g.test == "phi_psi":
            base, plane = self._phi_geometry(acc, ai)
            if base is False:
                return FAIL
            return check_phi_psi(d, hyds, a, base, plane, p, extra)
        if g.test == "theta_tau":
            if site.partner is not None:
                ups = [acc.xyz[site.partner]]
            else:
                ups = [sub(scale(a, 2.0), lp) for lp in self.lone_pairs(acc, ai)]
            return check_acceptor_theta_tau(d, hyds, a, ups, p, extra)
        return check_acceptor_generic(d, a, acc.bonded_xyz(ai), p, extra)

    def _phi_geometry(self, side: TypedSide, i: int):
        """Base point and plane of the φ test (ChimeraX get_phi_plane_params); False = bad connectivity."""
        bonded = side.bonded_xyz(i)
        a = side.xyz[i]
        if len(bonded) >= 2:
            b1, b2 = bonded[0], bonded[1]
            return scale((b1[0] + b2[0], b1[1] + b2[1], b1[2] + b2[2]), 0.5), (a, b1, b2)
        if len(bonded) == 1:
            if not side.neighbors[i]:
                return bonded[0], None
            j = side.neighbors[i][0]
            grand = [side.xyz[k] for k in side.neighbors[j] if k != i] + list(side.explicit_h(j))
            if len(grand) == 1:
                return side.xyz[j], (a, side.xyz[j], grand[0])
            if len(grand) == 2:
                return side.xyz[j], (a, grand[0], grand[1])
            if len(grand) == 0:
                return side.xyz[j], None
            return False, None
        return None, None

    def donor_check(self, don: TypedSide, di: int, acc: TypedSide, ai: int, hyds: list[Vec]) -> Check:
        site = don.donors[di]
        g = self.R.donors[site.group]
        cls = acceptor_class(acc.elements[ai], acc.types[ai], self.types)
        if cls is None:
            return FAIL
        p = g.classes[cls]
        d, a = don.xyz[di], acc.xyz[ai]
        extra = self.R.sulfur_distance if (cls == "other" and acc.elements[ai] == "S") else 0.0
        if g.test == "upsilon_tau":
            heavy = don.neighbors[di]
            if len(heavy) != 1:
                return FAIL
            lps = self.lone_pairs(acc, ai) if cls == "sp3_N" else None
            refs = self.tau_refs(don, di, g.tau_symmetry, hyds) if (p.get("tau_min") is not None or p.get("tau_max") is not None) else []
            return check_donor_upsilon_tau(d, hyds, don.xyz[heavy[0]], a, p, refs, lps, extra)
        if g.test == "theta_tau":
            phi_geom = None
            if cls == "sp3_O" and acc.n_bonds(ai) == 2:
                b = acc.bonded_xyz(ai)
                phi_geom = (scale((b[0][0] + b[1][0], b[0][1] + b[1][1], b[0][2] + b[1][2]), 0.5), (a, b[0], b[1]))
            lps = self.lone_pairs(acc, ai) if cls == "sp3_N" else None
            return check_donor_theta_tau(d, hyds, a, p, phi_geom, lps, extra)
        return check_donor_generic(d, hyds, [don.xyz[k] for k in don.neighbors[di]], a, p, g.theta_min,
                                   g.bonded_angle_min, extra)

    def test(self, don: TypedSide, di: int, acc: TypedSide, ai: int) -> tuple[Check, Check] | None:
        """Both halves plus the metal rule; None when the pair is not an H-bond."""
        # a planar N near a metal (an acceptor coordinating it) cannot donate
        if don.elements[di] == "N" and di in don.acceptors and self.metal_neighbors(don, di):
            t = self.types.get(don.types[di])
            if t is not None and t[0] == 3:
                return None
        hyds = self.hydrogens(don, di)
        ac = self.acceptor_check(acc, ai, don, di, hyds)
        if not ac.ok:
            return None
        dc = self.donor_check(don, di, acc, ai, hyds)
        if not dc.ok:
            return None
        for m in self.metal_neighbors(acc, ai):
            if angle(don.xyz[di], acc.xyz[ai], m) < self.R.metal_min_angle:
                return None
        return ac, dc


def _resolve_criteria(criteria: HBondCriteria | str | Path | None, mode: str) -> ResolvedCriteria:
    if mode not in MODES and not (isinstance(criteria, HBondCriteria) and mode in criteria.modes):
        raise HBondError(f"unknown H-bond mode '{mode}' (expected relaxed or strict)")
    try:
        crit = criteria if isinstance(criteria, HBondCriteria) else load_criteria(criteria)
        return crit.resolved(mode)
    except KnowledgeError as exc:
        raise HBondError(str(exc)) from None


def _coerce_hydrogens(explicit_h) -> ExplicitHydrogens:
    if explicit_h is None:
        return ExplicitHydrogens()
    if isinstance(explicit_h, ExplicitHydrogens):
        return explicit_h
    if isinstance(explicit_h, Mapping) and set(explicit_h) <= {"pocket", "ligand"}:
        return ExplicitHydrogens(pocket=explicit_h.get("pocket"), ligand=explicit_h.get("ligand"))
    raise HBondError("explicit_h must be an ExplicitHydrogens or a mapping with 'pocket'/'ligand' entries")


def environment_metals(cx: Complex) -> np.ndarray:
    """Coordinates of the metal ions kept aside in ``cx.environment`` (not displayed)."""
    env = cx.environment
    if env is None or env.array_length() == 0:
        return np.zeros((0, 3))
    mask = np.isin(np.char.upper(env.element.astype(str)), list(METALS))
    return env.coord[mask].astype(float)


def type_complex(cx: Complex, explicit_h: ExplicitHydrogens | Mapping | None = None) -> tuple[TypedSide, TypedSide]:
    """The typed pocket and ligand of ``cx`` (donor/acceptor groups per atom)."""
    eh = _coerce_hydrogens(explicit_h)
    return type_pocket(cx, eh.side("pocket")), type_ligand(cx, eh.side("ligand"))


def find_hbonds(cx: Complex, mode: str = "relaxed", explicit_h: ExplicitHydrogens | Mapping | None = None,
                criteria: HBondCriteria | str | Path | None = None) -> list[HBond]:
    """All H-bonds between ``cx.pocket`` and ``cx.ligand``, in both directions.

    ``mode``: "relaxed" (ChimeraX default, MiSI-Bench ground truth) or "strict", or a mode the given
    ``criteria`` add (:meth:`~misi_agent.knowledge.hbonds.HBondCriteria.with_mode`).
    ``explicit_h``: real hydrogens (:class:`ExplicitHydrogens`, or a mapping with
    ``pocket``/``ligand`` entries of heavy-atom index → ``(k, 3)`` coordinates).
    ``criteria``: a loaded :class:`HBondCriteria` or a path to an edited criteria YAML.
    The result is sorted by (pocket atom, ligand atom, donor side): deterministic.
    """
    R = _resolve_criteria(criteria, mode)
    pocket, ligand = type_complex(cx, explicit_h)
    eng = _Engine(pocket, ligand, R, environment_metals(cx))
    p_idx = sorted(set(pocket.donors) | set(pocket.acceptors))
    l_idx = sorted(set(ligand.donors) | set(ligand.acceptors))
    if not p_idx or not l_idx:
        return []
    p_xyz = np.array([pocket.xyz[i] for i in p_idx])
    l_xyz = np.array([ligand.xyz[i] for i in l_idx])
    out: list[HBond] = []
    P = cx.pocket
    for a, b in pairs_within(p_xyz, l_xyz, R.max_distance):
        pi, li = p_idx[a], l_idx[b]
        for donor_side in ("protein", "ligand"):
            if donor_side == "protein":
                if pi not in pocket.donors or li not in ligand.acceptors:
                    continue
                res = eng.test(pocket, pi, ligand, li)
                dsite, asite = pocket.donors[pi], ligand.acceptors[li]
                don, acc, di, ai = pocket, ligand, pi, li
            else:
                if li not in ligand.donors or pi not in pocket.acceptors:
                    continue
                res = eng.test(ligand, li, pocket, pi)
                dsite, asite = ligand.donors[li], pocket.acceptors[pi]
                don, acc, di, ai = ligand, pocket, li, pi
            if res is None:
                continue
            ac, dc = res
            hyds = eng.hydrogens(don, di)
            hd = min(distance(h, acc.xyz[ai]) for h in hyds) if hyds else None
            angles = {
                "theta": dc.theta if dc.theta is not None else ac.theta,
                "phi": ac.phi if ac.phi is not None else dc.phi,
                "upsilon": dc.upsilon if dc.upsilon is not None else ac.upsilon,
                "tau": dc.tau,
            }
            out.append(HBond(
                residue_name=str(P.res_name[pi]), residue_number=int(P.res_id[pi]),
                insertion_code=str(P.ins_code[pi]), chain=str(P.chain_id[pi]),
                protein_atom=pocket.names[pi], ligand_atom=ligand.names[li], donor=donor_side,
                donor_atom=don.names[di], acceptor_atom=acc.names[ai],
                distance=round(distance(don.xyz[di], acc.xyz[ai]), 4),
                h_distance=None if hd is None else round(hd, 4),
                angles=MappingProxyType({k: (None if v is None else round(v, 2)) for k, v in angles.items()}),
                group=f"{dsite.group}/{asite.group}", donor_group=dsite.group, acceptor_group=asite.group,
                protein_index=pi, ligand_index=li))
    out.sort(key=lambda h: (h.protein_index, h.ligand_index, h.donor))
    return out
