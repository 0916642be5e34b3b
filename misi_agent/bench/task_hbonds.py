"""Item generators of the H-bond tasks: residue–ligand interaction (T4), interaction
location (T8) and pocket–ligand interaction (T9).

The truth comes from the project's H-bond engine (:func:`misi_agent.tools.hbonds.find_hbonds`,
ChimeraX's relaxed criteria, pocket–ligand, each pair once) and the answer strings from
the answer forms of :mod:`misi_agent.bench.answers` (``Yes: ARG NH2, O1B; ...`` and
``ARG 45 NH2 A, O1B; ...``).

Decisions of our own (**(ours)**):

* T4: item ``k`` asks for a positive (a residue with at least one H-bond to the ligand) when
  ``k`` is even and a negative (a pocket residue with none) when odd, so the two columns
  are balanced. Negatives are drawn from the residues in contact with the ligand (a heavy
  atom within :data:`CONTACT_CUTOFF` Å) when there are any, else from the whole pocket,
  so a "No" cannot be read off from distance alone. Bonds are listed in the residue's
  atom order, then the ligand's.
* T8: the answer brings the centroid of the bond's two atoms onto the line of sight through
  the image centre. In the front view's coordinates (camera on the z axis) ``move x −cx,
  move y −cy`` puts the centroid (cx, cy, cz) on that axis exactly, whatever its depth, so
  perspective does not matter; the answer rounds −cx and −cy to whole Å (half up). Decoys
  perturb signs and magnitudes: x' is −x or x with its magnitude changed by 2–4 Å, y' the
  same for y, and the options are (x, y), (x', y), (x, y'), (x', y') — a 2 × 2 grid, so the
  truth is not the option that shares most with the others (a text-only tell). All four
  options differ by at least 2 Å in some component and render visibly differently.
* T9: every H-bond, sorted by chain, residue number, insertion code, residue atom and ligand
  atom; complexes without an H-bond are not used (OURS["empty_truth"]).
"""
from __future__ import annotations

import math

import numpy as np

from misi_agent.bench import tasks as T
from misi_agent.bench.answers import BondItem, format_pocket_answer, format_residue_answer
from misi_agent.bench.items import MAX_TRIES, ImageSpec, ItemSpec, NotApplicable, all_distinct, place_options
from misi_agent.bench.task_geometry import _base, view_images, views
from misi_agent.camera import VIEW_NAMES, Command, apply_commands
from misi_agent.structure import Complex, ResidueKey

CONTACT_CUTOFF = 4.5  # Å, heavy-atom distance that makes a residue a contact residue (T4 negatives)
T8_MIN_GAP = 2  # Å, options differ by at least this much in some component


def complex_hbonds(cx: Complex) -> list:
    """The pocket–ligand H-bonds of a complex (relaxed criteria), each pair once, in a stable order."""
    from misi_agent.tools.hbonds import find_hbonds

    bonds = find_hbonds(cx, mode="relaxed")
    seen, out = set(), []
    for hb in sorted(bonds, key=_bond_sort_key):
        k = (residue_key_of(hb), hb.protein_atom, hb.ligand_atom)
        if k not in seen:
            seen.add(k)
            out.append(hb)
    return out


def residue_key_of(hb) -> ResidueKey:
    return ResidueKey(str(hb.chain), int(hb.residue_number), str(hb.insertion_code or ""), str(hb.residue_name))


def _bond_sort_key(hb):
    return (str(hb.chain), int(hb.residue_number), str(hb.insertion_code or ""), int(hb.protein_index), int(hb.ligand_index))


def bond_item(hb) -> BondItem:
    """The answer form of an engine H-bond (protein atom first, whichever is the donor)."""
    number = f"{int(hb.residue_number)}{hb.insertion_code or ''}"
    return BondItem(str(hb.residue_name), str(hb.protein_atom), str(hb.ligand_atom), number, str(hb.chain))


def _bond_params(hb) -> dict:
    return {"chain": str(hb.chain), "residue_name": str(hb.residue_name), "residue_number": int(hb.residue_number),
            "insertion_code": str(hb.insertion_code or ""), "protein_atom": str(hb.protein_atom),
            "ligand_atom": str(hb.ligand_atom), "donor": str(getattr(hb, "donor", "")),
            "protein_index": int(hb.protein_index), "ligand_index": int(hb.ligand_index)}


# ----------------------------------------------------------------------------- T4


def contact_residues(cx: Complex, cutoff: float = CONTACT_CUTOFF) -> list[ResidueKey]:
    """Pocket residues with a heavy atom within ``cutoff`` Å of a ligand heavy atom."""
    keys = cx.residues()
    idx = cx.residue_index()
    d = np.linalg.norm(cx.pocket.coord[:, None, :] - cx.ligand.coord[None, :, :], axis=2).min(axis=1)
    near = sorted(set(int(i) for i in idx[d <= cutoff]))
    return [keys[i] for i in near]


def residue_pool(cx: Complex, hbonds: list, positive: bool) -> tuple[list[ResidueKey], str]:
    """The residues a T4 item may show, and which pool they come from ("hbond", "contact" or "pocket")."""
    bonded = {residue_key_of(hb) for hb in hbonds}
    keys = cx.residues()
    if positive:
        return [k for k in keys if k in bonded], "hbond"
    contact = [k for k in contact_residues(cx) if k not in bonded]
    return (contact, "contact") if contact else ([k for k in keys if k not in bonded], "pocket")


def residue_ligand(cx: Complex, rng: np.random.Generator, positive: bool, hbonds: list | None = None) -> ItemSpec:
    """T4: six views of one residue + the ligand; ``No`` or ``Yes: ARG NH2, O1B; ...``."""
    hbonds = complex_hbonds(cx) if hbonds is None else hbonds
    pool, kind = residue_pool(cx, hbonds, positive)
    if not pool:
        raise NotApplicable(f"{cx.pdb_id}: no {'H-bonded' if positive else 'non-H-bonded'} residue")
    key = pool[int(rng.integers(len(pool)))]
    mine = [hb for hb in hbonds if residue_key_of(hb) == key]
    mine.sort(key=lambda hb: (int(hb.protein_index), int(hb.ligand_index)))
    answer = format_residue_answer([bond_item(hb) for hb in mine])
    scenes = views(cx, VIEW_NAMES, residues=[key])
    images = view_images(scenes, VIEW_NAMES, "", "residue and ligand, ")
    params = {"residue": {"chain": key.chain, "name": key.name, "number": key.number, "insertion_code": key.ins_code},
              "positive": bool(mine), "n_bonds": len(mine), "negative_pool": None if mine else kind,
              "bonds": [_bond_params(hb) for hb in mine]}
    prompt = {"residue_name": key.name, "residue_number": f"{key.number}{key.ins_code}", "chain": key.chain}
    return _base(T.RESIDUE_LIGAND, cx, images, answer, params, prompt)


# ----------------------------------------------------------------------------- T8


def round_half_up(v: float) -> int:
    """Whole Å, halves away from −∞ (the same rule everywhere: generator and checker)."""
    return int(math.floor(v + 0.5))


def location_answer(front_coords: np.ndarray, protein_atom: int, ligand_atom: int) -> tuple[int, int]:
    """(dx, dy) in whole Å that bring the two atoms' centroid onto the screen centre's line of sight."""
    c = (np.asarray(front_coords[protein_atom], float) + np.asarray(front_coords[ligand_atom], float)) / 2.0
    return round_half_up(-c[0]), round_half_up(-c[1])


def location_text(dx: int, dy: int) -> str:
    return f"move x {dx}, move y {dy}"


def perturb_component(v: int, rng: np.random.Generator) -> tuple[int, str]:
    """Another value for one component: its sign flipped (when that moves it by at least
    :data:`T8_MIN_GAP`) or its magnitude changed by 2–4 Å (sign kept; from 0, either sign)."""
    if abs(2 * v) >= T8_MIN_GAP and rng.random() < 0.5:
        return -v, "flip"
    step = int(rng.integers(T8_MIN_GAP, 5))
    if v == 0:
        return int(rng.choice([-1, 1])) * step, "magnitude"
    sign = 1 if v > 0 else -1
    grow = abs(v) - step < 1 or rng.random() < 0.5
    return sign * (abs(v) + step if grow else abs(v) - step), "magnitude"


def location_options(truth: tuple[int, int], rng: np.random.Generator) -> tuple[list[tuple[int, int]], list[str]]:
    """The three decoys of an interaction-location item and their schemes.

    One perturbed value per component, x' and y' (:func:`perturb_component`), and the decoys
    (x', y), (x, y'), (x', y'): the four options are the corners of a 2 × 2 grid, so every
    option shares each of its components with exactly one other and the truth does not stand
    out as the option that resembles the others most.
    """
    (x, y) = truth
    x2, sx = perturb_component(x, rng)
    y2, sy = perturb_component(y, rng)
    return [(x2, y), (x, y2), (x2, y2)], [f"{sx}_x", f"{sy}_y", f"{sx}_x+{sy}_y"]


def interaction_location(cx: Complex, rng: np.random.Generator, hbonds: list | None = None) -> ItemSpec:
    """T8: six views + one named H-bond; options ``move x a, move y b``, the answer centres the bond."""
    hbonds = complex_hbonds(cx) if hbonds is None else hbonds
    if not hbonds:
        raise NotApplicable(f"{cx.pdb_id}: no H-bond between pocket and {cx.ligand_code}")
    hb = hbonds[int(rng.integers(len(hbonds)))]
    scenes = views(cx, VIEW_NAMES)
    front = scenes[0]
    n_p = cx.pocket.array_length()
    pi, li = int(hb.protein_index), n_p + int(hb.ligand_index)
    if front.atom_names[pi] != hb.protein_atom or front.atom_names[li] != hb.ligand_atom:
        raise NotApplicable(f"{cx.pdb_id}: H-bond atom indices do not match the scene")  # defensive; never seen
    truth = location_answer(front.coords, pi, li)
    for _ in range(MAX_TRIES):
        decoys, schemes = location_options(truth, rng)
        opts = [truth] + decoys
        if any(max(abs(a[0] - b[0]), abs(a[1] - b[1])) < T8_MIN_GAP for i, a in enumerate(opts) for b in opts[i + 1:]):
            continue
        states = [apply_commands(front.coords, [Command("move", "x", a), Command("move", "y", b)]) for a, b in opts]
        if all_distinct(states):
            break
    else:
        raise NotApplicable(f"{cx.pdb_id}: no visibly distinct option set")
    options, letter, order = place_options(truth, decoys, rng)
    texts = {L: location_text(*o) for L, o in zip(T.CHOICE_LETTERS, options)}
    images = view_images(scenes, VIEW_NAMES, "", "complex, ")
    c = (front.coords[pi] + front.coords[li]) / 2.0
    params = {"bond": _bond_params(hb), "bond_centroid_front": [float(v) for v in c],
              "truth": location_text(*truth), "commands": location_text(*truth),
              "options": {L: {"commands": texts[L], "scheme": "truth" if order[k] == 0 else schemes[order[k] - 1]}
                          for k, L in enumerate(T.CHOICE_LETTERS)}}
    prompt = {"chain": str(hb.chain), "residue_name": str(hb.residue_name),
              "residue_number": f"{int(hb.residue_number)}{hb.insertion_code or ''}",
              "residue_atom": str(hb.protein_atom), "ligand_atom": str(hb.ligand_atom)}
    return _base(T.INTERACTION_LOCATION, cx, images, letter, params, prompt, options=texts)


# ----------------------------------------------------------------------------- T9


def pocket_ligand(cx: Complex, rng: np.random.Generator, hbonds: list | None = None) -> ItemSpec:
    """T9: six views of the whole complex; every pocket–ligand H-bond in ``ARG 45 NH2 A, O1B`` form."""
    hbonds = complex_hbonds(cx) if hbonds is None else hbonds
    if not hbonds:
        raise NotApplicable(f"{cx.pdb_id}: no H-bond between pocket and {cx.ligand_code}")
    answer = format_pocket_answer([bond_item(hb) for hb in hbonds])
    scenes = views(cx, VIEW_NAMES)
    images = view_images(scenes, VIEW_NAMES, "", "complex, ")
    params = {"n_bonds": len(hbonds), "bonds": [_bond_params(hb) for hb in hbonds]}
    return _base(T.POCKET_LIGAND, cx, images, answer, params, {})
