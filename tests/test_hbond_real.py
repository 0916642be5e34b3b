"""The engine on real complexes (committed fixtures): determinism, modes, hand-checked bonds.

Hand-checked bonds (numbers computed from the file coordinates; the tests recompute them
with plain numpy, independently of the engine):

* 1hpx (HIV-1 protease / KNI-272), chain B Asp 29 backbone N–H···O3 of KNI: N···O3
  2.925 Å; the amide H placed on the C(Gly 28)–N–CA anti-bisector gives H···O3 1.917 Å and
  N–H···O3 176.5°: inside strict (H···A ≤ 2.23 Å, ≥ 146°) and relaxed limits.
* 1hpx chain B Gly 48 O···H–N2 of KNI (ligand amide NH): N2···O 3.157 Å, H···O 2.434 Å,
  N–H···O 127.9°: a bond with relaxed criteria (≥ 126°), none with strict ones (≥ 146°).
* 7w06 (itaconate complex) chain A Thr 130 OG1–H···O2: OG1···O2 2.594 Å and
  CB–OG1···O2 (upsilon) 100.3°, inside the hydroxyl donor's 70–161° (relaxed) and
  90–141° (strict); no hydrogen is placed on the rotatable OH.
* 1aku (flavodoxin / FMN) chain A Thr 11 backbone N–H···O1P: N···O1P 2.571 Å,
  H···O1P 1.586 Å, N–H···O 163.6°.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from misi_agent.structure import load_complex
from misi_agent.tools.hbonds import find_hbonds

DATA = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"
ENTRIES = {"1hpx": None, "7w06": "ITN", "1aku": None, "7rh3": "59O", "7xfa": "D9J", "6yqw": "82I"}


@pytest.fixture(scope="module")
def complexes():
    out = {}
    for pid, code in ENTRIES.items():
        f = next(DATA.glob(f"{pid}.*.gz"))
        out[pid] = load_complex(f, code)
    return out


def _full(bonds):
    return [(h.pair_key, h.donor, h.donor_atom, h.acceptor_atom, h.distance, h.h_distance, dict(h.angles), h.group)
            for h in bonds]


def test_deterministic_across_calls_and_reloads(complexes):
    for pid, cx in complexes.items():
        first = _full(find_hbonds(cx))
        assert first == _full(find_hbonds(cx))
        f = next(DATA.glob(f"{pid}.*.gz"))
        assert first == _full(find_hbonds(load_complex(f, ENTRIES[pid])))


def test_strict_bonds_are_a_subset_of_relaxed(complexes):
    total_strict = total_relaxed = 0
    for cx in complexes.values():
        relaxed = {(h.pair_key, h.donor) for h in find_hbonds(cx, mode="relaxed")}
        strict = {(h.pair_key, h.donor) for h in find_hbonds(cx, mode="strict")}
        assert strict <= relaxed
        total_strict += len(strict)
        total_relaxed += len(relaxed)
    assert total_strict < total_relaxed


def _find(bonds, chain, resnum, patom, latom):
    return [h for h in bonds if (h.chain, h.residue_number, h.protein_atom, h.ligand_atom) == (chain, resnum, patom, latom)]


def _atom(arr, chain, resnum, name):
    m = (arr.chain_id == chain) & (arr.res_id == resnum) & (arr.atom_name == name)
    (i,) = np.flatnonzero(m)
    return i, arr.coord[i].astype(float)


def _lig(arr, name):
    (i,) = np.flatnonzero(arr.atom_name == name)
    return i, arr.coord[i].astype(float)


def _ang(a, b, c):
    u, v = a - b, c - b
    return math.degrees(math.acos(np.dot(u, v) / np.linalg.norm(u) / np.linalg.norm(v)))


def _amide_h(n, c_prev, ca):
    u = (c_prev - n) / np.linalg.norm(c_prev - n) + (ca - n) / np.linalg.norm(ca - n)
    return n - 1.01 * u / np.linalg.norm(u)


def test_1hpx_asp29_backbone_nh_to_kni(complexes):
    cx = complexes["1hpx"]
    _, n = _atom(cx.pocket, "B", 29, "N")
    _, ca = _atom(cx.pocket, "B", 29, "CA")
    _, c_prev = _atom(cx.pocket, "B", 28, "C")
    _, o3 = _lig(cx.ligand, "O3")
    h = _amide_h(n, c_prev, ca)
    assert np.linalg.norm(n - o3) == pytest.approx(2.925, abs=1e-3)
    assert np.linalg.norm(h - o3) == pytest.approx(1.917, abs=1e-3)
    assert _ang(n, h, o3) == pytest.approx(176.5, abs=0.1)
    for mode in ("strict", "relaxed"):
        (b,) = _find(find_hbonds(cx, mode=mode), "B", 29, "N", "O3")
        assert (b.donor, b.donor_group) == ("protein", "amide_nh")
        assert b.h_distance == pytest.approx(1.917, abs=1e-3)
        assert b.angles["theta"] == pytest.approx(176.5, abs=0.1)


def test_1hpx_gly48_o_from_kni_amide_relaxed_only(complexes):
    cx = complexes["1hpx"]
    _, o = _atom(cx.pocket, "B", 48, "O")
    _, n2 = _lig(cx.ligand, "N2")
    assert np.linalg.norm(o - n2) == pytest.approx(3.157, abs=1e-3)
    (b,) = _find(find_hbonds(cx), "B", 48, "O", "N2")
    assert (b.donor, b.donor_group, b.acceptor_group) == ("ligand", "amide_nh", "amide_o")
    assert b.h_distance == pytest.approx(2.434, abs=1e-3)
    assert 126.0 <= b.angles["theta"] < 146.0
    assert not _find(find_hbonds(cx, mode="strict"), "B", 48, "O", "N2")


def test_7w06_thr130_hydroxyl_to_itaconate(complexes):
    cx = complexes["7w06"]
    _, og1 = _atom(cx.pocket, "A", 130, "OG1")
    _, cb = _atom(cx.pocket, "A", 130, "CB")
    _, o2 = _lig(cx.ligand, "O2")
    assert np.linalg.norm(og1 - o2) == pytest.approx(2.594, abs=1e-3)
    assert _ang(cb, og1, o2) == pytest.approx(100.3, abs=0.1)
    (b,) = _find(find_hbonds(cx, mode="strict"), "A", 130, "OG1", "O2")
    assert (b.donor, b.donor_group, b.acceptor_group) == ("protein", "hydroxyl", "carboxylate")
    assert b.h_distance is None and b.angles["upsilon"] == pytest.approx(100.3, abs=0.1)


def test_1aku_thr11_backbone_nh_to_fmn_phosphate(complexes):
    cx = complexes["1aku"]
    _, n = _atom(cx.pocket, "A", 11, "N")
    _, ca = _atom(cx.pocket, "A", 11, "CA")
    _, c_prev = _atom(cx.pocket, "A", 10, "C")
    _, o1p = _lig(cx.ligand, "O1P")
    h = _amide_h(n, c_prev, ca)
    assert np.linalg.norm(n - o1p) == pytest.approx(2.571, abs=1e-3)
    assert np.linalg.norm(h - o1p) == pytest.approx(1.586, abs=1e-3)
    assert _ang(n, h, o1p) == pytest.approx(163.6, abs=0.1)
    (b,) = _find(find_hbonds(cx), "A", 11, "N", "O1P")
    assert b.group == "amide_nh/phosphate_o"


def test_explicit_hydrogens_on_a_real_pocket(complexes):
    cx = complexes["1hpx"]
    n_idx, n = _atom(cx.pocket, "B", 29, "N")
    _, ca = _atom(cx.pocket, "B", 29, "CA")
    _, c_prev = _atom(cx.pocket, "B", 28, "C")
    implicit = find_hbonds(cx)
    # a completely deprotonated pocket: the backbone NH bond needs its hydrogen
    bare = find_hbonds(cx, explicit_h={"pocket": {}})
    assert _find(implicit, "B", 29, "N", "O3") and not _find(bare, "B", 29, "N", "O3")
    # ligand donors do not depend on pocket hydrogens for heavy-atom acceptors
    assert {h.pair_key for h in bare if h.donor == "ligand"} <= {h.pair_key for h in implicit}
    # give that N its hydrogen back explicitly
    with_h = find_hbonds(cx, explicit_h={"pocket": {int(n_idx): _amide_h(n, c_prev, ca)[None]}})
    (b,) = _find(with_h, "B", 29, "N", "O3")
    assert b.h_distance == pytest.approx(1.917, abs=1e-3)


def test_explicit_histidine_tautomer(complexes):
    cx = complexes["7xfa"]
    ne2_idx, ne2 = _atom(cx.pocket, "A", 158, "NE2")
    _, cd2 = _atom(cx.pocket, "A", 158, "CD2")
    _, ce1 = _atom(cx.pocket, "A", 158, "CE1")
    both = {h.donor for h in _find(find_hbonds(cx), "A", 158, "NE2", "OAJ")}
    assert both == {"protein", "ligand"}          # HIS without hydrogens: donor and acceptor
    h = _amide_h(ne2, cd2, ce1)[None]
    protonated = {b.donor for b in _find(find_hbonds(cx, explicit_h={"pocket": {int(ne2_idx): h}}), "A", 158, "NE2", "OAJ")}
    bare = {b.donor for b in _find(find_hbonds(cx, explicit_h={"pocket": {}}), "A", 158, "NE2", "OAJ")}
    assert protonated == {"protein"} and bare == {"ligand"}
