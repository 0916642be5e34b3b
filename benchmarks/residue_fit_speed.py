"""Speed of fitting a residue's ideal geometry to the pictures (tools/residue_fit.py), against a reference.

The fit evaluates the articulated residue thousands of times (finite-difference Jacobians over pose
and torsions), so the small rotations inside it dominate. This script fits the H-bonded residues of a
real entry drawn as the residue–ligand task draws them (one residue and the ligand, six raster views;
the reconstruction is the oracle one, so only the fit is timed) twice in the same run: with the
module as it is, and as first written (scipy's ``Rotation`` per torsion and per pose; per view and
class one ``ndimage.map_coordinates`` call and a k-d tree for the reverse term; scipy's finite
differences, one residual call per parameter step, where the module now evaluates all steps of a
Jacobian as one batch). It prints the seconds of each, the ratio, and how far apart the two fits'
atoms lie: the arithmetic is the same to about 1e-13, but a fit with several near-equal minima can
land in another one after such a change.

    python benchmarks/residue_fit_speed.py [--entry 6yqw] [--ligand 82I] [--repeat 1]
"""
from __future__ import annotations

import argparse
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from misi_agent.bench.task_hbonds import complex_hbonds, residue_key_of
from misi_agent.camera import VIEW_NAMES
from misi_agent.render.raster import RasterRenderer
from misi_agent.scene import scene_from_complex
from misi_agent.structure import load_complex
from misi_agent.tools import residue_fit as RF
from misi_agent.tools.image_hbonds import _named_coords, _single_residue, oracle_reconstruction
from misi_agent.tools.identity import identify_residues
from misi_agent.tools.reconstruction import load_views

FIXTURES = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"


def reference_articulate(model, torsion_deltas: np.ndarray) -> np.ndarray:
    """``articulate`` as first written: one scipy ``Rotation`` per turned bond."""
    X = model.coords.copy()
    for (a, b, moved), th in zip(model.torsions, torsion_deltas):
        if not moved or th == 0.0:
            continue
        axis = X[b] - X[a]
        axis /= np.linalg.norm(axis)
        R = Rotation.from_rotvec(axis * th).as_matrix()
        m = list(moved)
        X[m] = (X[m] - X[b]) @ R.T + X[b]
    return X


def reference_atoms(prob, x: np.ndarray) -> np.ndarray:
    nt = len(prob.model.torsions)
    X = reference_articulate(prob.model, x[6:6 + nt]) - prob.centre
    D = prob.distance(x)
    z = np.array([0.0, 0.0, 1.0])
    centre = (x[3:6] + z * prob.D) * (D / prob.D) - z * D
    return X @ Rotation.from_rotvec(x[:3]).as_matrix().T + centre


def reference_residuals(prob, x: np.ndarray) -> np.ndarray:
    """The fit's residuals as first written: per view and class, ``ViewCostMap.sample``
    (``ndimage.map_coordinates``) and a k-d tree per view for the reverse term."""
    D = prob.distance(x)
    P = prob.points(reference_atoms(prob, x))
    out = []
    for vm, rev in zip(prob.views, prob.reverse):
        uv = np.nan_to_num(prob.project(P, vm, D), nan=-1e4)
        for c, rows in prob.groups:
            out.append(vm.sample(c, uv[rows]))
        if len(rev):
            d, _ = cKDTree(uv[prob.carbon_rows]).query(rev)
            out.append(np.minimum(d, RF.CAP_PX) * 0.5)
    return np.concatenate(out)


def reference_fit_image(prob, x0: np.ndarray) -> tuple[np.ndarray, float]:
    """``_fit_image`` as first written: scipy's own finite differences, one residual call per step."""
    x = x0
    for _ in range(2):
        prob.set_reverse(x)
        r = least_squares(lambda y: reference_residuals(prob, y), x, loss="soft_l1", f_scale=1.0,
                          max_nfev=30 * len(x), diff_step=1e-3)
        x = r.x
    return x, float(np.mean(np.minimum(np.abs(r.fun), RF.CAP_PX)))


@contextmanager
def reference_fit():
    """The module as first written: :func:`reference_fit_image`, :func:`reference_atoms` and
    :func:`reference_articulate` in place of the batched residuals, the batched Jacobian and the Rodrigues
    rotations."""
    saved = RF._fit_image, RF._Problem.atoms, RF.articulate
    RF._fit_image, RF._Problem.atoms, RF.articulate = reference_fit_image, reference_atoms, reference_articulate
    try:
        yield
    finally:
        RF._fit_image, RF._Problem.atoms, RF.articulate = saved


def _problems(entry: str, ligand: str):
    cx = load_complex(FIXTURES / f"{entry}.cif.gz", ligand=ligand)
    keys = sorted({residue_key_of(hb) for hb in complex_hbonds(cx)}, key=lambda k: k.number)
    out = []
    for key in keys:
        scenes = [scene_from_complex(cx, v, residues=[key]) for v in VIEW_NAMES]
        images = {v: r.image for v, r in zip(VIEW_NAMES, RasterRenderer().render_many(scenes, 512))}
        rec = _single_residue(oracle_reconstruction(cx, residues=[key]))
        res = identify_residues(rec, {}, known={0: (key.name, key.number, key.ins_code)})[0]
        cloud, cloud_cls, carbon = RF.residue_cloud(rec)
        out.append((key, load_views(images), carbon, float(rec.distance),
                    _named_coords(res, np.asarray(rec.coords, float)), cloud, cloud_cls))
    return out


def _fit_all(problems) -> tuple[float, list]:
    t0 = time.perf_counter()
    fits = [RF.fit_residue(views, key.name, carbon, D, named=named, cloud=cloud, cloud_classes=cls, alone=True)
            for key, views, carbon, D, named, cloud, cls in problems]
    return time.perf_counter() - t0, fits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entry", default="6yqw")
    ap.add_argument("--ligand", default="82I")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    problems = _problems(a.entry, a.ligand)
    print(f"{a.entry}: {len(problems)} H-bonded residues ({', '.join(p[0].label() for p in problems)})")
    t_new = t_ref = 0.0
    for _ in range(a.repeat):
        dt, fits = _fit_all(problems)
        t_new += dt
        with reference_fit():
            dt, ref = _fit_all(problems)
        t_ref += dt
    for (key, *_), f, r in zip(problems, fits, ref):
        apart = max(np.linalg.norm(f.coords[n] - r.coords[n]) for n in f.coords)
        print(f"  {key.label():10s} cost {f.cost_px:.3f} px (reference {r.cost_px:.3f}); atoms apart ≤ {apart:.2e} Å")
    print(f"fit: {t_new / a.repeat:.1f} s   reference (as first written): {t_ref / a.repeat:.1f} s   "
          f"ratio {t_ref / t_new:.2f}x")


if __name__ == "__main__":
    main()
