"""Residue atoms from the pictures by fitting the residue's ideal geometry (tools/residue_fit.py).

A real fixture (6YQW with its ligand 82I) is drawn as the residue–ligand task draws it (one residue
and the ligand, six views); the views are reconstructed with no structure file, and the fitted
residue atoms are compared with the entry's atoms in the reconstruction's frame (its Å scale is
the ball-size estimate, so the comparison rescales about the camera like the pictures do).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from misi_agent.bench.task_hbonds import complex_hbonds, residue_key_of
from misi_agent.camera import VIEW_NAMES
from misi_agent.render.raster import RasterRenderer
from misi_agent.scene import scene_from_complex
from misi_agent.structure import load_complex
from misi_agent.tools.reconstruction import load_views, reconstruct
from misi_agent.tools.residue_fit import articulate, fit_residue, residue_cloud, residue_model, start_from_named

DATA = Path(__file__).resolve().parent.parent / "misi_agent" / "data" / "structures"


@pytest.fixture(scope="module")
def pictured():
    cx = load_complex(DATA / "6yqw.cif.gz", ligand="82I")
    key = sorted({residue_key_of(hb) for hb in complex_hbonds(cx)}, key=lambda k: k.number)[-1]
    scenes = [scene_from_complex(cx, v, residues=[key]) for v in VIEW_NAMES]
    images = {v: r.image for v, r in zip(VIEW_NAMES, RasterRenderer().render_many(scenes, 512))}
    return key, scenes[0], images


@pytest.fixture(scope="module")
def wrong_start(pictured):
    """The pictured residue's views, centre-line points (and their classes), carbon class and camera distance D as
    reconstructed; its true atoms in the reconstruction's frame; and the same atoms turned 120° about CA–CB (its N
    on another atom's place): a start in a wrong minimum."""
    from scipy.spatial.transform import Rotation

    key, front, images = pictured
    rec = reconstruct(images)
    cloud, cloud_cls, carbon = residue_cloud(rec)
    Dt, D = float(-front.coords[:, 2].mean()), rec.distance
    z = np.array([0.0, 0.0, 1.0])
    true = {str(front.atom_names[i]): (front.coords[i] + z * Dt) * (D / Dt) - z * D
            for i in range(len(front)) if not front.is_ligand[i]}
    ca, cb = true["CA"], true["CB"]
    turn = Rotation.from_rotvec((cb - ca) / np.linalg.norm(cb - ca) * np.radians(120.0))
    turned = {n: turn.apply(x - ca) + ca for n, x in true.items()}
    return key, load_views(images), cloud, cloud_cls, carbon, D, true, turned


def test_model_torsions_turn_only_their_side():
    m = residue_model("LYS")
    assert m is not None and "OXT" not in m.atom_names
    X = articulate(m, np.full(len(m.torsions), 0.7))
    bonded = np.linalg.norm(X[m.bonds[:, 0]] - X[m.bonds[:, 1]], axis=1)
    ideal = np.linalg.norm(m.coords[m.bonds[:, 0]] - m.coords[m.bonds[:, 1]], axis=1)
    assert np.allclose(bonded, ideal, atol=1e-9)  # turning about bonds keeps every bond length
    assert not np.allclose(X, m.coords)
    # from its own atoms, the start reproduces the pose (torsions taken from the named dihedrals)
    named = {n: X[k] + np.array([1.0, -2.0, 3.0]) for k, n in enumerate(m.atom_names)}
    x = start_from_named(m, named)
    Y = articulate(m, x[6:]) - m.coords.mean(0)
    from scipy.spatial.transform import Rotation

    Y = Y @ Rotation.from_rotvec(x[:3]).as_matrix().T + x[3:6]
    assert np.abs(Y - np.array([named[n] for n in m.atom_names])).max() < 1e-6


def test_fit_places_residue_atoms_to_a_tenth_of_an_angstrom(pictured):
    key, front, images = pictured
    rec = reconstruct(images)
    cloud, cloud_cls, carbon = residue_cloud(rec)
    fit = fit_residue(load_views(images), key.name, carbon, rec.distance, cloud=cloud, cloud_classes=cloud_cls,
                      alone=True)
    assert fit is not None and fit.cost_px < 0.9
    Dt, D = float(-front.coords[:, 2].mean()), rec.distance
    z = np.array([0.0, 0.0, 1.0])
    true = {str(front.atom_names[i]): front.coords[i] for i in range(len(front)) if not front.is_ligand[i]}
    err = [np.linalg.norm((fit.coords[n] + z * D) * (Dt / D) - z * Dt - true[n]) for n in fit.coords if n in true]
    assert len(err) == len(true)
    assert np.median(err) < 0.2 and max(err) < 0.45, np.round(err, 2)


def test_free_scale_reads_the_camera_distance_from_the_residue(pictured):
    """With the distance free, the residue's known size is the Å ruler: from starts 6 % too near and too
    far, the fitted camera distance lands within 3 % of the true one (the fit moves it, it is not kept)."""
    key, front, images = pictured
    rec = reconstruct(images)
    cloud, cloud_cls, carbon = residue_cloud(rec)
    views = load_views(images)
    Dt = float(-front.coords[:, 2].mean())
    for k in (0.94, 1.06):
        start = Dt * k
        fit = fit_residue(views, key.name, carbon, start, cloud=cloud * (start / rec.distance),
                          cloud_classes=cloud_cls, alone=True, free_scale=True)
        assert fit is not None and fit.cost_px < 0.9
        assert abs(fit.distance / Dt - 1.0) < 0.03, (k, fit.distance / Dt)
        assert abs(fit.distance / Dt - 1.0) < abs(k - 1.0) / 2  # moved at least halfway to the truth


def test_batched_residuals_and_jacobian_match_their_one_call_definitions(pictured):
    """The fit's residuals are computed for batches of parameter sets (all views and classes in one gather,
    Rodrigues rotations, every Jacobian step at once). On the real pictures they equal the one-call
    definitions: per view and class ``ViewCostMap.sample`` and a k-d tree for the reverse term, scipy's
    rotations and scipy's finite differences."""
    from scipy.optimize._numdiff import approx_derivative
    from scipy.spatial import cKDTree
    from scipy.spatial.transform import Rotation

    from misi_agent.tools.residue_fit import (CAP_PX, ViewCostMap, _Problem, _starts_from_cloud, atom_class,
                                              nearest_distances, rotvec_matrices)

    key, front, images = pictured
    rec = reconstruct(images)
    cloud, cloud_cls, carbon = residue_cloud(rec)
    model = residue_model(key.name)
    classes = sorted({atom_class(e, carbon) for e in model.elements})
    prob = _Problem(model, [ViewCostMap.of(vd, classes) for vd in load_views(images)], carbon, rec.distance)
    x0 = _starts_from_cloud(model, cloud)[0]
    x0[6:] = 0.4  # torsions turned, so the articulation is exercised
    prob.set_reverse(x0)
    assert sum(len(r) for r in prob.reverse) > 50

    def one_call(x):
        X = model.coords.copy()
        for (a, b, moved), th in zip(model.torsions, x[6:]):
            axis = (X[b] - X[a]) / np.linalg.norm(X[b] - X[a])
            m = list(moved)
            X[m] = (X[m] - X[b]) @ Rotation.from_rotvec(axis * th).as_matrix().T + X[b]
        P = prob.points((X - prob.centre) @ Rotation.from_rotvec(x[:3]).as_matrix().T + x[3:6])
        out = []
        for vm, rev in zip(prob.views, prob.reverse):
            uv = np.nan_to_num(prob.project(P, vm, prob.D), nan=-1e4)
            out += [vm.sample(c, uv[rows]) for c, rows in prob.groups]
            if len(rev):
                out.append(np.minimum(cKDTree(uv[prob.carbon_rows]).query(rev)[0], CAP_PX) * 0.5)
        return np.concatenate(out)

    rng = np.random.default_rng(0)
    xs = x0 + rng.normal(size=(8, len(x0))) * np.r_[0.3, 0.3, 0.3, 1.0, 1.0, 1.0, [0.5] * (len(x0) - 6)]
    batch = prob.residuals_many(xs)
    for x, row in zip(xs, batch):
        want = one_call(x)
        assert row.shape == want.shape and np.abs(row - want).max() < 1e-9
        assert np.array_equal(prob.residuals(x), row)
    J = prob.jacobian(x0, 1e-3)
    J_ref = approx_derivative(prob.residuals, x0, rel_step=1e-3, method="2-point")
    assert J.shape == J_ref.shape and np.abs(J - J_ref).max() < 1e-6 * np.abs(J_ref).max()
    # the pieces: rotations as scipy's, nearest distances as a k-d tree's
    v = rng.normal(size=(20, 3)) * 2.0
    assert np.allclose(rotvec_matrices(v), Rotation.from_rotvec(v).as_matrix(), atol=1e-14)
    assert np.allclose(rotvec_matrices(np.zeros((1, 3))), np.eye(3))
    pts, targets = rng.normal(size=(3, 40, 3)) * 5.0, rng.normal(size=(30, 3)) * 5.0
    got = nearest_distances(targets, pts)
    assert np.allclose(got, [cKDTree(p).query(targets)[0] for p in pts], rtol=0, atol=1e-12)


def test_restraint_pulls_its_atom_out_of_a_wrong_minimum(wrong_start):
    """A restraint pulls its atom to the place chemistry says, hard enough to win over the pictures' soft-L1 pull
    (its residual is stretched so that the loss costs it exactly its square): started from the residue turned 120°
    about CA–CB (its N on another atom's place), a pull on N to the entry's N brings N there, where the unpulled fit
    from the same start stays off, and the pictures' own cost of the pulled pose is the lower one."""
    from misi_agent.tools.residue_fit import RESTRAINT_WEIGHT, Restraint, ViewCostMap, _Problem, atom_class

    key, views, _, _, carbon, D, true, start = wrong_start
    free = fit_residue(views, key.name, carbon, D, named=start, search=False, flips=False)
    pulled = fit_residue(views, key.name, carbon, D, named=start, search=False, flips=False,
                         restraints=[Restraint("N", true["N"])])
    assert np.linalg.norm(free.coords["N"] - true["N"]) > 1.0
    assert np.linalg.norm(pulled.coords["N"] - true["N"]) < 0.5
    # the restraint's rows: appended after the pictures' rows, and the loss costs each exactly its square
    model = residue_model(key.name)
    classes = sorted({atom_class(e, carbon) for e in model.elements})
    prob = _Problem(model, [ViewCostMap.of(vd, classes) for vd in views], carbon, D)
    prob.restraints = [(list(model.atom_names).index("N"), true["N"], 0.0)]
    r = prob.restraint_residuals(pulled.params[None])[0]
    dev = pulled.coords["N"] - true["N"]
    assert np.allclose(2.0 * (np.sqrt(1.0 + r ** 2) - 1.0), (RESTRAINT_WEIGHT * dev) ** 2)  # soft-L1 loss = square
    assert len(prob.residuals(pulled.params)) == len(r) + sum(len(rows) for _, rows in prob.groups) * len(views)
    # the pull led the fit out of a wrong minimum: the pictures themselves like the pulled pose better (1.13 / 1.64 px)
    assert pulled.cost_px < free.cost_px


def test_a_poor_fit_from_misnamed_atoms_is_searched_anew(wrong_start):
    """A fit started from atoms named wrongly (the residue turned 120° about CA–CB, its N on another atom's place)
    stays in a wrong minimum and fits the pictures poorly; searched from the residue's centre-line points instead
    (:func:`~misi_agent.tools.image_hbonds.searched_if_better`), the fit puts every atom back within half an Å and
    fits well. A fit the search does not beat by the margin is kept as it is."""
    from misi_agent.tools.image_hbonds import POOR_FIT_PX, searched_if_better

    key, views, cloud, cloud_cls, carbon, D, true, turned = wrong_start
    poor = fit_residue(views, key.name, carbon, D, named=turned, search=False, flips=False)
    assert poor.cost_px > POOR_FIT_PX and np.linalg.norm(poor.coords["N"] - true["N"]) > 1.0
    found = searched_if_better(views, key.name, carbon, D, cloud, cloud_cls, poor, flips=False)
    assert found is not poor and found.cost_px <= POOR_FIT_PX
    assert max(np.linalg.norm(found.coords[n] - true[n]) for n in found.coords if n in true) < 0.5
    good = fit_residue(views, key.name, carbon, D, named=true, search=False, flips=False)
    assert searched_if_better(views, key.name, carbon, D, cloud, cloud_cls, good, flips=False) is good



@pytest.fixture(scope="module")
def pymol_pocket():
    """6YQW's whole pocket as PyMOL draws it for the pocket–ligand task (six views, labels piled on the ligand), the
    views loaded, the true front scene and the residues that H-bond the ligand."""
    from render_support import six_views

    cx = load_complex(DATA / "6yqw.cif.gz", ligand="82I")
    scenes, images = six_views(cx, "pymol")
    keys = sorted({residue_key_of(hb) for hb in complex_hbonds(cx)}, key=lambda k: k.number)
    return load_views(images), scenes["front"], keys


def test_a_residue_is_found_about_its_known_ca_in_a_crowded_pocket(pymol_pocket):
    """Where only a residue's CA is known (PyMOL draws its label there; T9 triangulates it), poses about it are
    scored on the pictures and the best fitted, the CA held by a restraint and its N, C and O by the CAs of its
    sequence neighbours at the trans peptide's spans (as T9 does where their labels are triangulated too): each
    H-bonding residue of 6YQW's pocket, from these CAs alone (no named atoms, no points), lands with its atoms where
    the entry has them (median under 0.3 Å, every N and O within 0.4 Å), and the carbon colour the pictures give it
    fits far better than the other one."""
    from misi_agent.tools.image_hbonds import NEXT_CA_SPANS, PREVIOUS_CA_SPANS
    from misi_agent.tools.residue_fit import Restraint

    views, front, keys = pymol_pocket
    D = float(-front.coords[:, 2].mean())
    ca = {front.residue_keys[front.residue[i]]: front.coords[i] for i in range(len(front))
          if not front.is_ligand[i] and front.atom_names[i] == "CA"}
    found = 0
    for key in keys:
        idx = [i for i in range(len(front)) if not front.is_ligand[i] and front.residue_keys[front.residue[i]] == key]
        true = {str(front.atom_names[i]): front.coords[i] for i in idx}
        restraints = [Restraint("CA", true["CA"])]
        for k, spans in ((key.number - 1, PREVIOUS_CA_SPANS), (key.number + 1, NEXT_CA_SPANS)):
            near = [p for nk, p in ca.items() if nk.chain == key.chain and nk.number == k]
            restraints += [Restraint(atom, near[0], length) for atom, length in spans] if near else []
        assert len(restraints) == 4
        fits = {c: fit_residue(views, key.name, c, D, at=("CA", true["CA"]), restraints=restraints, turns=False)
                for c in ("POCKET_C0", "POCKET_C1")}
        best = min(fits.values(), key=lambda f: f.cost_px)
        err = {n: np.linalg.norm(best.coords[n] - true[n]) for n in best.coords if n in true}
        polar = [e for n, e in err.items() if n[0] in "NO"]  # the atoms H-bonds are made of
        found += np.median(list(err.values())) < 0.3 and max(polar) < 0.4 and best.cost_px < 0.9
        assert max(f.cost_px for f in fits.values()) > best.cost_px + 0.3  # the other carbon colour fits far worse
    assert len(keys) >= 2 and found == len(keys), found


@pytest.fixture(scope="module")
def raster_pocket():
    """6YQW's whole pocket as the raster renderer draws it for the pocket–ligand task (six views), reconstructed
    from the pictures alone; the true front scene and the residues that H-bond the ligand."""
    from render_support import six_views

    cx = load_complex(DATA / "6yqw.cif.gz", ligand="82I")
    scenes, images = six_views(cx, "raster")
    keys = sorted({residue_key_of(hb) for hb in complex_hbonds(cx)}, key=lambda k: k.number)
    return load_views(images), reconstruct(images), scenes["front"], keys


def test_a_residue_settled_in_a_wrong_pose_is_searched_again_about_its_ca(raster_pocket):
    """T9's refit about the fitted CA (image_hbonds._refitted_about_ca): a residue near the ligand whose fit settled
    in a wrong minimum (here each H-bonding residue of 6YQW's raster pocket turned 120° about its CA–CB, so its side
    chain and backbone N, C, O lie on other atoms' places; of 10 residues of 20 raster T9 items whose bonding N/O
    lay off with their CA in place, the true pose cost the views 0.08-0.60 px less than the fit in 7) is fitted
    again from poses about its CA and lands where the entry has it (every N and O within 0.4 Å; Phe 44's O, 2 Å off
    on some CPUs while a torsion flip had to gain 0.02 px, see residue_fit.FLIP_MARGIN_PX); a residue whose fit is
    good, or that the caller lists in ``skip`` (just fitted about its label's point), is left as it is."""
    from dataclasses import replace

    from scipy.spatial.transform import Rotation

    from misi_agent.tools.identity import ResidueIdentity
    from misi_agent.tools.image_hbonds import _refitted_about_ca

    views, rec, front, keys = raster_pocket
    Dt, D = float(-front.coords[:, 2].mean()), float(rec.distance)
    for key in keys:
        true = {str(front.atom_names[i]): front.coords[i] * (D / Dt) for i in range(len(front))
                if not front.is_ligand[i] and front.residue_keys[front.residue[i]] == key}
        ca, cb = true["CA"], true["CB"]
        turn = Rotation.from_rotvec((cb - ca) / np.linalg.norm(cb - ca) * np.radians(120.0))
        wrong = ResidueIdentity(1, (), key.name, key.number, "", {}, 1.0, "ocr", "ocr",
                                completed={n: tuple(turn.apply(x - ca) + ca) for n, x in true.items()})
        fits = {}
        (found,) = _refitted_about_ca(views, rec, [wrong], fits)
        assert found is not wrong and fits[1].cost_px < 0.9
        polar = {n: np.linalg.norm(np.asarray(x) - true[n]) for n, x in found.completed.items() if n[0] in "NO"}
        assert max(polar.values()) < 0.4, {n: round(float(e), 2) for n, e in polar.items()}
        kept = replace(found, group=2)
        assert _refitted_about_ca(views, rec, [kept], {2: fits[1]})[0] is kept  # a good fit is not searched again
        assert _refitted_about_ca(views, rec, [wrong], {}, skip={1})[0] is wrong  # nor one the caller has just fitted
