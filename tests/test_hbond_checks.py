"""Each geometric H-bond test on constructed coordinates just inside and just outside its limits.

Limits are read from the packaged criteria (so the tests follow the YAML), in both modes:
relaxed = strict + 0.4 Å / 20°.
"""
from __future__ import annotations

import math

import pytest

from misi_agent.knowledge.hbonds import load_criteria
from misi_agent.tools import hbonds as hb
from misi_agent.tools.hydrogens import bond_positions, lone_pairs, placed_hydrogens

EPS_D = 0.01   # Å inside / outside a distance limit
EPS_A = 1.0    # degrees inside / outside an angle limit


@pytest.fixture(scope="module", params=["strict", "relaxed"])
def crit(request):
    return load_criteria().resolved(request.param)


def polar(r: float, ang: float, origin=(0.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0), up=(0.0, 1.0, 0.0)):
    """The point at distance r from ``origin`` making angle ``ang`` (deg) with ``axis``, in the axis–up plane."""
    a = math.radians(ang)
    return tuple(o + r * (math.cos(a) * x + math.sin(a) * u) for o, x, u in zip(origin, axis, up))


# ----------------------------------------------------------------------------- acceptors


def test_phi_psi_acceptor_distance_and_phi_limits(crit):
    # ketone O at the origin, its C on -x, the carbonyl plane is xy; D along +x is phi = 180
    p = crit.acceptors["ketone_o"].params["params"]
    a, c, cc = (0, 0, 0), (-1.23, 0, 0), (-1.9, 1.1, 0)
    plane = (a, c, cc)
    limit = p["distance"]
    assert hb.check_phi_psi(polar(limit - EPS_D, 0), [], a, c, plane, p).ok
    assert not hb.check_phi_psi(polar(limit + EPS_D, 0), [], a, c, plane, p).ok
    # phi = angle C–O···D in the plane: D at 180 - phi from +x
    phi = p["phi_min"]
    inside = hb.check_phi_psi(polar(3.0, 180 - (phi + EPS_A)), [], a, c, plane, p)
    outside = hb.check_phi_psi(polar(3.0, 180 - (phi - EPS_A)), [], a, c, plane, p)
    assert inside.ok and inside.phi == pytest.approx(phi + EPS_A)
    assert not outside.ok and outside.phi == pytest.approx(phi - EPS_A)


def test_theta_uses_the_hydrogen_when_known(crit):
    p = crit.acceptors["ketone_o"].params["params"]
    a, c = (0, 0, 0), (-1.23, 0, 0)
    d = (2.9, 0, 0)
    theta = p["theta_min"]
    # H 1.0 Å from D, bent so that D–H···A = theta ± 1
    for delta, ok in ((EPS_A, True), (-EPS_A, False)):
        t = theta + delta
        # place H: angle at H between A and D equals t; put H off-axis in the xy plane
        h = _h_for_theta(d, a, t, 1.0)
        res = hb.check_phi_psi(d, [h], a, c, (a, c, (-1.9, 1.1, 0)), p)
        assert res.theta == pytest.approx(t, abs=1e-6)
        assert res.ok is ok
    # no hydrogen: theta passes by default
    assert hb.check_phi_psi(d, [], a, c, None, p).ok


def _h_for_theta(d, a, theta, bond):
    """A hydrogen 'bond' Å from d such that the angle a–H–d equals theta (in the xy plane)."""
    lo, hi = 0.0, 180.0
    for _ in range(200):
        mid = (lo + hi) / 2
        h = polar(bond, 180 - mid, origin=d)   # mid = angle between D→H and D→A (A is on -x of D)
        if hb.angle(a, h, d) > theta:
            lo = mid
        else:
            hi = mid
    return polar(bond, 180 - (lo + hi) / 2, origin=d)


def test_syn_and_anti_parameters_are_chosen_by_side():
    relaxed = load_criteria().resolved("relaxed")
    p = relaxed.acceptors["carboxylate"]
    syn, anti = p.params["syn"], p.params["anti"]
    assert syn["phi_min"] < anti["phi_min"]          # 70° vs 90° relaxed
    a, c, o2 = (0, 0, 0), (-1.25, 0, 0), (-1.875, 1.08, 0)   # O1, C, O2 (syn atom on +y)
    phi = (syn["phi_min"] + anti["phi_min"]) / 2      # 80°: fine for syn, too sharp for anti
    d_syn = polar(3.0, 180 - phi, up=(0, 1, 0))
    d_anti = polar(3.0, 180 - phi, up=(0, -1, 0))
    assert hb.is_syn(d_syn, a, c, o2) and not hb.is_syn(d_anti, a, c, o2)
    assert hb.check_syn_anti(d_syn, [], a, o2, c, syn, anti).ok
    assert not hb.check_syn_anti(d_anti, [], a, o2, c, syn, anti).ok


def test_theta_tau_acceptor_upsilon_range(crit):
    # hydroxyl O at origin, its C on -x: upsilon = C–O···D = 180 - (angle of D from +x)
    p = crit.acceptors["hydroxyl"].params["params"]
    a, c = (0, 0, 0), (-1.43, 0, 0)
    lo, hi = p["upsilon_min"], p["upsilon_max"]
    assert hb.check_acceptor_theta_tau(polar(2.8, 180 - (lo + EPS_A)), [], a, [c], p).ok
    assert not hb.check_acceptor_theta_tau(polar(2.8, 180 - (lo - EPS_A)), [], a, [c], p).ok
    if hi < 180:
        assert hb.check_acceptor_theta_tau(polar(2.8, 180 - (hi - EPS_A)), [], a, [c], p).ok
        assert not hb.check_acceptor_theta_tau(polar(2.8, 180 - (hi + EPS_A)), [], a, [c], p).ok
    limit = p["distance"]
    assert hb.check_acceptor_theta_tau(polar(limit - EPS_D, 30), [], a, [c], p).ok
    assert not hb.check_acceptor_theta_tau(polar(limit + EPS_D, 30), [], a, [c], p).ok


def test_phenol_acceptor_upper_upsilon():
    relaxed = load_criteria().resolved("relaxed").acceptors["phenol"].params["params"]
    assert relaxed["upsilon_max"] == pytest.approx(173)
    a, c = (0, 0, 0), (-1.36, 0, 0)
    assert hb.check_acceptor_theta_tau(polar(3.0, 180 - 172), [], a, [c], relaxed).ok
    assert not hb.check_acceptor_theta_tau(polar(3.0, 180 - 174), [], a, [c], relaxed).ok


def test_lone_pair_acceptor_any_bisector_may_pass():
    # a tertiary amine N whose three substituents point below the xy plane: one lone pair along +z
    p = load_criteria().resolved("relaxed").acceptors["amine_tertiary"].params["params"]
    n = (0.0, 0.0, 0.0)
    subs = [polar(1.47, 109.47, axis=(0, 0, 1), up=(math.cos(t), math.sin(t), 0)) for t in (0, 2.094, 4.189)]
    lp = lone_pairs(n, subs)
    assert len(lp) == 1 and lp[0] == pytest.approx((0, 0, 1), abs=1e-3)
    ups = [hb.sub(hb.scale(n, 2.0), x) for x in lp]
    assert hb.check_acceptor_theta_tau((0, 0, 3.0), [], n, ups, p).ok             # along the lone pair
    assert not hb.check_acceptor_theta_tau((0, 3.0, 0), [], n, ups, p).ok         # 90° off it


def test_generic_acceptor_bonded_angle(crit):
    p = crit.acceptors["generic_o"].params["params"]
    a, c = (0, 0, 0), (-1.4, 0, 0)
    m = p["angle_min"]
    assert hb.check_acceptor_generic(polar(3.0, 180 - (m + EPS_A)), a, [c], p).ok
    assert not hb.check_acceptor_generic(polar(3.0, 180 - (m - EPS_A)), a, [c], p).ok


def test_sulfur_donor_gets_extra_distance():
    relaxed = load_criteria().resolved("relaxed")
    p = relaxed.acceptors["ketone_o"].params["params"]
    s = relaxed.sulfur_distance
    a, c = (0, 0, 0), (-1.23, 0, 0)
    d = polar(p["distance"] + s - EPS_D, 0)
    assert not hb.check_phi_psi(d, [], a, c, None, p).ok
    assert hb.check_phi_psi(d, [], a, c, None, p, extra_distance=s).ok


# ----------------------------------------------------------------------------- donors


@pytest.mark.parametrize("group", ["ammonium", "hydroxyl", "guanidinium", "amide_nh2"])
def test_upsilon_tau_donor_limits(crit, group):
    # D at origin, its heavy neighbour on -x: upsilon = heavy–D···A
    p = crit.donors[group].classes["sp2_O"]
    d, heavy = (0, 0, 0), (-1.49, 0, 0)
    lo, hi = p["upsilon_min"], p["upsilon_max"]
    at = lambda r, ups: polar(r, 180 - ups)
    ok = lambda a: hb.check_donor_upsilon_tau(d, [], heavy, a, p, []).ok
    assert ok(at(3.0, lo + EPS_A)) and not ok(at(3.0, lo - EPS_A))
    assert ok(at(3.0, hi - EPS_A)) and not ok(at(3.0, hi + EPS_A))
    mid = (lo + hi) / 2
    assert ok(at(p["distance"] - EPS_D, mid)) and not ok(at(p["distance"] + EPS_D, mid))


def test_tau_limits():
    # donor on the z axis above its heavy atom; substituents of the heavy atom at 0/120/240°
    d, heavy = (0.0, 0.0, 1.5), (0.0, 0.0, 0.0)
    refs = [polar(1.0, 109.5, axis=(0, 0, -1), up=(math.cos(t), math.sin(t), 0)) for t in (0.0, 2.0944, 4.1888)]
    staggered = (3.0 * math.cos(math.pi / 3), 3.0 * math.sin(math.pi / 3), 2.5)    # 60° from two refs
    eclipsed = (3.0, 0.05, 2.5)                                                  # ~1° from one ref
    ok, low = hb.tau_test(d, staggered, heavy, refs, 20.0, None)
    assert ok and low == pytest.approx(60.0, abs=0.1)
    ok, low = hb.tau_test(d, eclipsed, heavy, refs, 20.0, None)
    assert not ok and low < 2.0
    assert hb.tau_test(d, eclipsed, heavy, refs, None, 30.0)[0]          # in-plane wanted
    assert not hb.tau_test(d, staggered, heavy, refs, None, 30.0)[0]
    assert hb.tau_test(d, eclipsed, heavy, [], 20.0, None)[0]            # undetermined passes


@pytest.mark.parametrize("group", ["amide_nh", "ring5_nh"])
def test_theta_tau_donor_needs_a_hydrogen_and_limits(crit, group):
    p = crit.donors[group].classes["sp2_O"]
    d, h = (0.0, 0.0, 0.0), (1.01, 0.0, 0.0)
    hd = p["h_distance"]
    assert hb.check_donor_theta_tau(d, [h], (1.01 + hd - EPS_D, 0, 0), p).ok
    assert not hb.check_donor_theta_tau(d, [h], (1.01 + hd + EPS_D, 0, 0), p).ok
    assert not hb.check_donor_theta_tau(d, [], (2.5, 0, 0), p).ok        # θ/τ donors fail without H
    t = p["theta_min"]
    a_in = _a_for_theta(d, h, t + EPS_A, 1.9)
    a_out = _a_for_theta(d, h, t - EPS_A, 1.9)
    assert hb.check_donor_theta_tau(d, [h], a_in, p).ok
    assert not hb.check_donor_theta_tau(d, [h], a_out, p).ok


def _a_for_theta(d, h, theta, r):
    """An acceptor r Å from H with angle D–H···A = theta (xy plane)."""
    return polar(r, 180 - theta, origin=h)


def test_generic_donor_distance_and_bonded_angle():
    relaxed = load_criteria().resolved("relaxed")
    g = relaxed.donors["generic_s"]
    p = g.classes["sp2_O"]
    d, cb = (0, 0, 0), (-1.81, 0, 0)
    assert p["distance"] == pytest.approx(4.05)
    ok = lambda a: hb.check_donor_generic(d, [], [cb], a, p, g.theta_min, g.bonded_angle_min).ok
    assert ok(polar(4.04, 30)) and not ok(polar(4.06, 30))
    m = g.bonded_angle_min
    assert ok(polar(3.5, 180 - (m + EPS_A))) and not ok(polar(3.5, 180 - (m - EPS_A)))


def test_acceptor_class():
    types = {"O2": (3, 1), "O3": (4, 2), "Npl": (3, 3), "N3": (4, 3), "S3": (4, 2)}
    assert hb.acceptor_class("O", "O2", types) == "sp2_O"
    assert hb.acceptor_class("O", "O3", types) == "sp3_O"
    assert hb.acceptor_class("N", "Npl", types) == "sp3_O"
    assert hb.acceptor_class("N", "N3", types) == "sp3_N"
    assert hb.acceptor_class("S", "S3", types) == "other"
    assert hb.acceptor_class("O", "??", types) is None


# ----------------------------------------------------------------------------- hydrogens


def test_placed_hydrogens_follow_heavy_atoms():
    # planar N with two heavy neighbours (backbone amide): one H on the anti-bisector
    n, c, ca = (0.0, 0.0, 0.0), (-0.67, 1.16, 0.0), (-0.73, -1.2, 0.0)
    (h,) = placed_hydrogens(n, 3, 3, 1.01, [c, ca], None)
    assert hb.distance(n, h) == pytest.approx(1.01)
    assert hb.angle(c, n, h) == pytest.approx(hb.angle(ca, n, h), abs=1e-6)
    assert abs(h[2]) < 1e-9
    # planar NH2 (Asn ND2): two H at 120° in the plane of the coplanar reference
    cg, od1 = (-1.33, 0.0, 0.0), (-1.95, 1.07, 0.0)
    hs = placed_hydrogens(n, 3, 3, 1.01, [cg], [od1])
    assert len(hs) == 2 and all(abs(x[2]) < 1e-9 for x in hs)
    assert all(hb.angle(cg, n, x) == pytest.approx(120.0) for x in hs)
    # rotors and lone-pair atoms get none: Lys NZ (N3+, one heavy), Ser OG (O3), pyridine N (N2)
    assert placed_hydrogens(n, 4, 4, 1.01, [cg], None) == []
    assert placed_hydrogens(n, 4, 2, 0.96, [cg], None) == []
    assert placed_hydrogens(n, 3, 2, 1.01, [c, ca], None) == []
    # N3+ with two heavy neighbours: two tetrahedral H
    hs = placed_hydrogens(n, 4, 4, 1.01, [c, ca], None)
    assert len(hs) == 2 and hb.angle(hs[0], n, hs[1]) == pytest.approx(109.47, abs=0.1)
    assert bond_positions(n, 2, 1.0, [c]) == [pytest.approx(hb.scale(hb.unit(c), -1.0))]
