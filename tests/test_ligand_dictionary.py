"""The pictured ligand found in the Chemical Component Dictionary, and its chemistry given to the rebuilt atoms.

A real entry: 7x9k's 8OG (a nucleotide with its phosphate), its atoms as a perfect reconstruction would give
them (:func:`oracle_reconstruction`), with the readings spoiled the way the
pictures spoil them: atoms hidden, names misread, names not read at all.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from misi_agent.scene import scene_from_complex
from misi_agent.structure import load_complex
from misi_agent.tools.atom_typing import type_ligand
from misi_agent.tools.identity import element_of_class, recon_bonds
from misi_agent.tools.image_hbonds import UNSEEN, oracle_reconstruction
from misi_agent.tools.ligand_dictionary import (identify_component, map_to_component, rank_components,
                                                with_refined_hidden_atoms)

DATA = Path(__file__).resolve().parent.parent / "misi_agent" / "data" / "structures"


@pytest.fixture(scope="module")
def nucleotide():
    """7x9k with its ligand 8OG and the ligand's atoms as the pictures would rebuild them: elements by colour
    class, names, coordinates and bonds from distances."""
    cx = load_complex(DATA / "7x9k.cif.gz", ligand="8OG")
    rec = oracle_reconstruction(cx)
    names = scene_from_complex(cx, "front").atom_names
    lig = [int(i) for i in np.flatnonzero(rec.is_ligand)]
    pos = {i: k for k, i in enumerate(lig)}
    bonds = [(pos[a], pos[b]) for a, b in recon_bonds(np.asarray(rec.coords, float), rec.bonds, lig)]
    return (cx, [element_of_class(rec.classes[i]) for i in lig], np.asarray(rec.coords, float)[lig],
            [str(names[i]) for i in lig], bonds)


def test_the_read_names_and_bonds_find_the_component(nucleotide):
    """Every name read: 8OG ranks first among ~49 000 components, and every atom maps to its own name."""
    _, el, xyz, names, bonds = nucleotide
    read = {k: (n, e, 1.0) for k, (n, e) in enumerate(zip(names, el))}
    assert rank_components(read, bonds, len(el), top=3)[0][0] == "8OG"
    m = identify_component(el, xyz, names, bonds)
    assert m is not None and m.code == "8OG"
    assert (m.seen >= 0).all() and [names[k] for k in m.seen] == m.names
    twice = list(names)
    twice[names.index("C2'")] = "C4'"  # one name read on two atoms: neither reading is trusted, both are placed
    m = map_to_component("8OG", el, xyz, twice, bonds)
    assert (m.seen >= 0).all() and [names[k] for k in m.seen] == m.names


def test_misread_unread_and_hidden_atoms_are_named_and_placed_by_the_component(nucleotide):
    """Three names misread (two swapped, one a name 8OG does not have), two not read, two atoms hidden: the
    component is still 8OG, every pictured atom gets its true name, and the hidden ones come back near their
    true places, named as not pictured."""
    _, el, xyz, names, bonds = nucleotide
    true = list(names)
    hide = {true.index("C5'"), true.index("N7")}
    keep = [k for k in range(len(el)) if k not in hide]
    new = {k: j for j, k in enumerate(keep)}
    read = [true[k] for k in keep]
    a, b = read.index("O4'"), read.index("O3'")
    read[a], read[b] = read[b], read[a]
    read[read.index("C8")] = "C18"
    read[read.index("N1")] = "?N1"
    read[read.index("O6")] = "?O1"
    sub_bonds = [(new[x], new[y]) for x, y in bonds if x in new and y in new]
    m = identify_component([el[k] for k in keep], xyz[keep], read, sub_bonds)
    assert m is not None and m.code == "8OG"
    for t, k in enumerate(m.seen):
        if k >= 0:
            assert m.names[t] == true[keep[k]]
    placed = {m.names[t]: m.coords[t] for t in range(len(m.names)) if m.seen[t] < 0}
    assert set(placed) == {"C5'", "N7"}
    for k in hide:
        assert np.linalg.norm(placed[true[k]] - xyz[k]) < 1.5  # within a bond: torsions are not known


def test_the_rebuilt_ligand_takes_the_entrys_donors_and_acceptors(nucleotide):
    """With the component's chemistry the rebuilt ligand's N and O are typed as in the entry itself, hidden
    atoms included (OP1 and C6 not pictured, coordinates with 0.15 Å noise); from geometry alone (no
    dictionary) O6, left without its carbon, is typed as water, a donor."""
    from misi_agent.tools.identity import LigandIdentity, identify_residues
    from misi_agent.tools.image_hbonds import _drop_atoms, complex_from_identity

    cx = nucleotide[0]
    truth = type_ligand(cx)
    roles = lambda side: {n: (i in side.donors, i in side.acceptors) for i, n in enumerate(side.names)
                          if side.elements[i] in ("N", "O")}
    rec = oracle_reconstruction(cx, noise=0.15, seed=3)
    names = scene_from_complex(cx, "front").atom_names
    drop = np.array([bool(rec.is_ligand[i]) and str(names[i]) in ("OP1", "C6") for i in range(len(rec.coords))])
    rec = _drop_atoms(rec, drop)
    kept = np.flatnonzero(~drop)
    lig = {k: str(names[i]) for k, i in enumerate(kept) if rec.is_ligand[k]}
    ident = LigandIdentity(lig, {k: 1.0 for k in lig}, 0)
    residues = identify_residues(rec, {}, known={g: ("UNK", g + 1, "") for g in set(rec.residue[rec.residue >= 0])})
    with_ccd = complex_from_identity(rec, residues, ident, chain="A", dictionary=True)
    assert "8OG" in with_ccd.notes[0]
    side = type_ligand(with_ccd)
    got = {n.removeprefix(UNSEEN): r for n, r in roles(side).items()}
    assert got == roles(truth)
    plain = type_ligand(complex_from_identity(rec, residues, ident, chain="A"))
    assert roles(plain)["O6"] == (True, True) and roles(truth)["O6"] == (False, True)


@pytest.mark.parametrize("hide", [("OP1", "OP2", "O5'"), ("O3'", "C2'")])
def test_hidden_atoms_refined_to_the_components_short_range_geometry_come_closer_to_the_entry(nucleotide, hide):
    """Atoms hidden where the entry's conformation differs from the ideal one (the phosphate's turn, the sugar's
    pucker): the local superposition puts some 1.0–1.3 Å off; refined to the component's 1–2 and 1–3 distances
    to the pictured atoms, each comes within 0.3 Å, the pictured atoms do not move, and a rerun gives the same
    coordinates (seeded)."""
    _, el, xyz, names, bonds = nucleotide
    keep = [k for k in range(len(el)) if names[k] not in hide]
    new = {k: j for j, k in enumerate(keep)}
    sub_bonds = [(new[a], new[b]) for a, b in bonds if a in new and b in new]
    m = map_to_component("8OG", [el[k] for k in keep], xyz[keep], [names[k] for k in keep], sub_bonds)
    refined = with_refined_hidden_atoms(m)
    error = lambda match: {h: float(np.linalg.norm(match.coords[match.names.index(h)] - xyz[names.index(h)]))
                           for h in hide}
    before, after = error(m), error(refined)
    assert max(before.values()) > 1.0
    assert max(after.values()) < 0.3
    seen = m.seen >= 0
    assert np.array_equal(refined.coords[seen], m.coords[seen]) and np.array_equal(refined.seen, m.seen)
    assert refined.mol.GetNumAtoms() == m.mol.GetNumAtoms()
    assert np.array_equal(with_refined_hidden_atoms(m).coords, refined.coords)


def test_too_few_read_names_find_no_component(nucleotide):
    """Too few names read: no component, and the ligand keeps the chemistry perceived from its geometry; atom lists
    of different lengths are an error."""
    _, el, xyz, names, bonds = nucleotide
    assert identify_component(el, xyz, [f"?{e}{k}" for k, e in enumerate(el)], bonds) is None
    assert map_to_component("8OG", el, xyz, ["?"] * (len(el) - 3) + names[-3:], bonds) is None
    assert map_to_component("NOT_A_CODE", el, xyz, names, bonds) is None
    with pytest.raises(ValueError, match="one each an atom"):
        map_to_component("8OG", el[:-1], xyz, names, bonds)


def test_superposition_is_a_proper_rotation():
    """Hidden atoms are placed by a rotation, never a mirror image: a chiral centre keeps its hand."""
    from misi_agent.tools.geometry import kabsch

    rng = np.random.default_rng(0)
    src = rng.normal(size=(4, 3))
    mirrored = src * np.array([1.0, 1.0, -1.0])
    r, t = kabsch(src, mirrored)
    assert np.isclose(np.linalg.det(r), 1.0)
    assert np.abs(src @ r.T + t - mirrored).max() > 0.1  # a mirror image cannot be reached
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    q *= np.sign(np.linalg.det(q))
    r, t = kabsch(src, src @ q + 2.0)
    assert np.allclose(src @ r.T + t, src @ q + 2.0)
