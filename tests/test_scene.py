"""Scenes built from real fixtures: colour rules, labels, bonds, subsets and part-wise commands."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from rdkit import Chem

from misi_agent.camera import VIEW_NAMES, CommandError, apply_commands, fit_distance
from misi_agent.scene import HEX, color_class, hex_to_rgb, scene_from_complex
from misi_agent.structure import load_complex

FIXTURES = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"
TEST_DATA = Path(__file__).resolve().parent / "data"
# The benchmark's colours (../shared/docs/misi-bench.md): O red, N blue, ligand C grey,
# pocket carbons alternating purple / orange.
RED, BLUE, GREY = (255, 13, 13), (48, 80, 248), (144, 144, 144)
PURPLE, ORANGE = (0xBF, 0x99, 0xF2), (0xF2, 0xB3, 0x66)
CASES = [("7xfa.cif.gz", "D9J"), ("7w06.cif.gz", "ITN"), ("1hpx.pdb.gz", None)]


@lru_cache(maxsize=None)
def _complex(name: str, code: str | None):
    folder = TEST_DATA if name == "1bju.pdb.gz" else FIXTURES
    return load_complex(folder / name, code)


@lru_cache(maxsize=None)
def _scene(name: str, code: str | None, view: str = "front"):
    return scene_from_complex(_complex(name, code), view)


@pytest.mark.parametrize("name,code", CASES)
def test_colours_follow_the_benchmark_rules(name, code):
    s = _scene(name, code)
    rgb = [tuple(int(v) for v in c) for c in s.colors()]
    assert s.colors().dtype == np.uint8 and s.colors().shape == (len(s), 3)
    for i, el in enumerate(s.elements):
        el = el.upper()
        if el == "O":
            assert rgb[i] == RED
        elif el == "N":
            assert rgb[i] == BLUE
        elif el == "C":
            assert rgb[i] == (GREY if s.is_ligand[i] else (PURPLE, ORANGE)[s.residue[i] % 2])
        elif el == "S":
            assert rgb[i] == (255, 255, 48)
    assert {rgb[i] for i in np.flatnonzero(s.elements == "C") if not s.is_ligand[i]} == {PURPLE, ORANGE}


def test_other_elements_and_unknown_ones():
    s = _scene("7xfa.cif.gz", "D9J")  # ligand with Cl and F
    cls = s.color_classes()
    assert {cls[i] for i in np.flatnonzero(s.elements == "CL")} == {"CL"}
    assert {cls[i] for i in np.flatnonzero(s.elements == "F")} == {"F"}
    assert hex_to_rgb(HEX["CL"]) == (31, 240, 31)
    assert color_class("Se", False, 4) == "SE" and color_class("XE", True, -1) == "OTHER"
    assert color_class("C", False, 7) == "POCKET_C1" and color_class("C", True, -1) == "LIGAND_C"


@pytest.mark.parametrize("name,code", CASES)
def test_neighbouring_residues_have_different_carbon_colours(name, code):
    s = _scene(name, code)
    colours = s.colors()
    per_residue = []
    for k in range(len(s.residue_keys)):
        carbons = np.flatnonzero((s.residue == k) & (s.elements == "C"))
        assert carbons.size  # every amino acid has carbons
        assert len({tuple(colours[i]) for i in carbons}) == 1  # one colour per residue
        per_residue.append(tuple(colours[carbons[0]]))
    assert all(a != b for a, b in zip(per_residue, per_residue[1:]))
    # Sequence neighbours in the same chain (k, k+1 both in the pocket) therefore differ too.
    keys = s.residue_keys
    pairs = [(k, k + 1) for k in range(len(keys) - 1)
             if keys[k].chain == keys[k + 1].chain and keys[k + 1].number - keys[k].number <= 1]
    assert pairs and all(per_residue[a] != per_residue[b] for a, b in pairs)


@pytest.mark.parametrize("name,code", CASES + [("1bju.pdb.gz", None)])
def test_labels_one_per_residue_and_per_ligand_atom(name, code):
    cx = _complex(name, code)
    s = _scene(name, code)
    labels = s.labels()
    n_res, n_lig = len(cx.residues()), cx.ligand.array_length()
    assert len(labels) == n_res + n_lig
    assert [t for t, _ in labels[:n_res]] == [k.label() for k in cx.residues()]
    assert [t for t, _ in labels[n_res:]] == list(cx.ligand.atom_name)
    for k, (_, anchor) in enumerate(labels[:n_res]):
        ca = np.flatnonzero((s.residue == k) & (s.atom_names == "CA"))
        np.testing.assert_allclose(anchor, s.coords[ca[0]])
    np.testing.assert_allclose(np.array([a for _, a in labels[n_res:]]), s.coords[s.is_ligand])
    if name == "1bju.pdb.gz":
        assert {"GLY 184A", "TYR 184", "GLY 188A", "ALA 221A"} <= {t for t, _ in labels}


@pytest.mark.parametrize("name,code", CASES)
def test_bonds_are_short_and_ligand_orders_come_from_the_molecule(name, code):
    cx = _complex(name, code)
    s = _scene(name, code)
    lengths = np.linalg.norm(s.coords[s.bonds[:, 0]] - s.coords[s.bonds[:, 1]], axis=1)
    assert lengths.max() < 2.2 and lengths.min() > 0.9
    lig_bonds = s.is_ligand[s.bonds[:, 0]] & s.is_ligand[s.bonds[:, 1]]
    assert not np.any(s.is_ligand[s.bonds[:, 0]] != s.is_ligand[s.bonds[:, 1]])
    kek = Chem.Mol(cx.ligand_mol)
    Chem.Kekulize(kek, clearAromaticFlags=True)
    assert lig_bonds.sum() == kek.GetNumBonds()
    assert _counts(s.bond_orders[lig_bonds]) == _counts([int(b.GetBondTypeAsDouble()) for b in kek.GetBonds()])
    assert set(s.bond_orders[~lig_bonds]) == {1}
    assert (s.bond_orders[lig_bonds] == 2).any()


def _counts(values) -> dict[int, int]:
    vals, counts = np.unique(np.asarray(values, int), return_counts=True)
    return dict(zip(vals.tolist(), counts.tolist()))


def test_views_are_rigid_copies_centred_at_the_fit_distance():
    cx = _complex("7xfa.cif.gz", "D9J")
    world = np.concatenate([cx.pocket.coord, cx.ligand.coord]).astype(float)
    d = fit_distance(world)
    d0 = np.linalg.norm(world[:50, None] - world[None, :50], axis=-1)
    for view in VIEW_NAMES:
        s = scene_from_complex(cx, view)
        np.testing.assert_allclose(s.coords.mean(axis=0), [0, 0, -d], atol=1e-6)
        np.testing.assert_allclose(np.linalg.norm(s.coords[:50, None] - s.coords[None, :50], axis=-1), d0, atol=1e-4)
    with pytest.raises(CommandError, match="unknown view"):
        scene_from_complex(cx, "sideways")


def test_single_residue_scene_keeps_colour_parity_and_its_bonds():
    cx = _complex("7xfa.cif.gz", "D9J")
    full = scene_from_complex(cx, "front")
    for k in (0, 1, 4):
        key = cx.residues()[k]
        s = scene_from_complex(cx, "left", residues=[key])
        assert s.residue_keys == full.residue_keys and set(s.residue[~s.is_ligand]) == {k}
        assert s.is_ligand.sum() == cx.ligand.array_length()
        pocket_c = s.colors()[(~s.is_ligand) & (s.elements == "C")]
        assert {tuple(int(v) for v in c) for c in pocket_c} == {(PURPLE, ORANGE)[k % 2]}
        keep = full.is_ligand | (full.residue == k)
        both = keep[full.bonds[:, 0]] & keep[full.bonds[:, 1]]
        assert len(s.bonds) == both.sum()
        assert [t for t, _ in s.labels()] == [key.label()] + list(cx.ligand.atom_name)


def test_subset_renumbers_bonds_and_keeps_annotations():
    s = _scene("1hpx.pdb.gz", None)
    lig = s.subset(s.is_ligand)
    assert len(lig) == s.is_ligand.sum() and lig.is_ligand.all()
    np.testing.assert_array_equal(lig.coords, s.coords[s.is_ligand])
    np.testing.assert_array_equal(lig.atom_names, s.atom_names[s.is_ligand])
    assert lig.bonds.max() < len(lig)
    np.testing.assert_allclose(np.linalg.norm(lig.coords[lig.bonds[:, 0]] - lig.coords[lig.bonds[:, 1]], axis=1),
                               np.linalg.norm(s.coords[s.bonds[:, 0]] - s.coords[s.bonds[:, 1]], axis=1)[
                                   s.is_ligand[s.bonds[:, 0]] & s.is_ligand[s.bonds[:, 1]]])
    assert [t for t, _ in lig.labels()] == list(s.atom_names[s.is_ligand])


def test_apply_moves_all_or_one_part_about_its_own_centroid():
    s = _scene("7w06.cif.gz", "ITN")
    moved = s.apply("move x 3, move y -2")
    np.testing.assert_allclose(moved.coords - s.coords, np.broadcast_to([3, -2, 0], s.coords.shape), atol=1e-9)
    np.testing.assert_allclose(s.apply("roll z 40").coords, apply_commands(s.coords, "roll z 40"))
    lig = s.apply("roll x 75, move x -14", which="ligand")
    np.testing.assert_array_equal(lig.coords[~s.is_ligand], s.coords[~s.is_ligand])
    expected = apply_commands(s.coords[s.is_ligand], "roll x 75")
    np.testing.assert_allclose(lig.coords[s.is_ligand], expected + [-14, 0, 0], atol=1e-9)
    np.testing.assert_allclose(expected.mean(axis=0), s.coords[s.is_ligand].mean(axis=0), atol=1e-9)
    pocket = s.apply("roll y 30", which="pocket")
    np.testing.assert_array_equal(pocket.coords[s.is_ligand], s.coords[s.is_ligand])
    np.testing.assert_allclose(pocket.coords[~s.is_ligand].mean(axis=0), s.coords[~s.is_ligand].mean(axis=0), atol=1e-9)
    # The original scene is untouched; everything but the coordinates is shared.
    assert not np.shares_memory(moved.coords, s.coords)
    assert moved.residue_keys == s.residue_keys and moved.bonds is s.bonds
    with pytest.raises(CommandError, match="unknown part"):
        s.apply("move x 1", which="protein")
