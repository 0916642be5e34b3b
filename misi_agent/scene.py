"""What a rendering shows: atoms in view coordinates with their style, bonds and labels.

A :class:`Scene` is plain data that both renderers draw and every task generator
transforms. It is built from a :class:`~misi_agent.structure.Complex` in one of the six
canonical views and then moved with the command language (``Scene.apply``).

Colour rules (MiSI-Bench): oxygen red, nitrogen blue, ligand carbons grey, pocket residue
carbons alternating purple ``#BF99F2`` / orange ``#F2B366`` in residue order so that
neighbours differ; other elements in the usual Jmol-like colours.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from rdkit import Chem

from misi_agent.camera import VIEW_NAMES, apply_commands, fit_distance, initial_view, parse_commands
from misi_agent.structure import Complex, ResidueKey

HEX = {
    "O": "#FF0D0D",
    "N": "#3050F8",
    "LIGAND_C": "#909090",
    "POCKET_C0": "#BF99F2",
    "POCKET_C1": "#F2B366",
    "S": "#FFFF30",
    "P": "#FF8000",
    "F": "#90E050",
    "CL": "#1FF01F",
    "BR": "#A62929",
    "I": "#940094",
    "B": "#FFB5B5",
    "SE": "#FFA100",
    "FE": "#E06633",
    "ZN": "#7D80B0",
    "MG": "#8AFF00",
    "OTHER": "#FF1493",
}


def hex_to_rgb(h: str) -> tuple[int, int, int]:
    h = h.lstrip("#")
    return int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16)


def color_class(element: str, is_ligand: bool, residue: int) -> str:
    """The colour class of an atom: ``O``, ``N``, ``LIGAND_C``, ``POCKET_C0``/``POCKET_C1`` or an element."""
    el = element.upper()
    if el == "C":
        return "LIGAND_C" if is_ligand else f"POCKET_C{residue % 2}"
    if el in HEX:
        return el
    return "OTHER"


@dataclass(frozen=True)
class Scene:
    """Atoms in view coordinates (x right, y up, z toward the viewer) plus style and labels.

    ``residue[i]`` indexes ``residue_keys`` for pocket atoms and is −1 for ligand atoms.
    ``bonds`` is an (M, 2) index array with ``bond_orders`` (1, 2, 3; aromatic as 1/2 Kekulé).
    """

    pdb_id: str
    ligand_code: str
    coords: np.ndarray
    elements: np.ndarray
    atom_names: np.ndarray
    is_ligand: np.ndarray
    residue: np.ndarray
    residue_keys: tuple[ResidueKey, ...]
    bonds: np.ndarray
    bond_orders: np.ndarray

    def __len__(self) -> int:
        return int(self.coords.shape[0])

    @property
    def centroid(self) -> np.ndarray:
        """Centre of rotation: the centroid of the displayed atoms."""
        return self.coords.mean(axis=0)

    def color_classes(self) -> list[str]:
        return [color_class(e, bool(l), int(r)) for e, l, r in zip(self.elements, self.is_ligand, self.residue)]

    def colors(self) -> np.ndarray:
        """(N, 3) uint8 RGB colour of every atom."""
        return np.array([hex_to_rgb(HEX[c]) for c in self.color_classes()], dtype=np.uint8).reshape(-1, 3)

    def labels(self) -> list[tuple[str, np.ndarray]]:
        """(text, anchor point in view coordinates): one ``ARG 45`` per residue, the atom name per ligand atom.

        A residue label is anchored at its CA atom when shown, else at its centroid.
        """
        out = []
        for k, key in enumerate(self.residue_keys):
            idx = np.flatnonzero(self.residue == k)
            if idx.size == 0:
                continue
            ca = idx[self.atom_names[idx] == "CA"]
            anchor = self.coords[ca[0]] if ca.size else self.coords[idx].mean(axis=0)
            out.append((key.label(), anchor))
        for i in np.flatnonzero(self.is_ligand):
            out.append((str(self.atom_names[i]), self.coords[i]))
        return out

    def with_coords(self, coords: np.ndarray) -> "Scene":
        return replace(self, coords=np.asarray(coords, float))

    def apply(self, commands, which: str = "all") -> "Scene":
        """Apply commands to all atoms, or only to the ``ligand`` or the ``pocket`` (rolls about that part's centroid)."""
        if isinstance(commands, str):
            commands = parse_commands(commands)
        if which == "all":
            return self.with_coords(apply_commands(self.coords, commands))
        if which not in ("ligand", "pocket"):
            from misi_agent.camera import CommandError

            raise CommandError(f"unknown part {which!r} (expected all, ligand or pocket)")
        mask = self.is_ligand if which == "ligand" else ~self.is_ligand
        coords = self.coords.copy()
        coords[mask] = apply_commands(self.coords[mask], commands)
        return self.with_coords(coords)

    def subset(self, mask: np.ndarray) -> "Scene":
        """Only the atoms in ``mask`` (bonds between kept atoms survive; residue colours keep their parity)."""
        mask = np.asarray(mask, bool)
        new_index = -np.ones(len(self), dtype=int)
        new_index[mask] = np.arange(int(mask.sum()))
        keep = mask[self.bonds[:, 0]] & mask[self.bonds[:, 1]] if len(self.bonds) else np.zeros(0, bool)
        return replace(
            self,
            coords=self.coords[mask],
            elements=self.elements[mask],
            atom_names=self.atom_names[mask],
            is_ligand=self.is_ligand[mask],
            residue=self.residue[mask],
            bonds=new_index[self.bonds[keep]].reshape(-1, 2),
            bond_orders=self.bond_orders[keep],
        )


def _bond_arrays(cx: Complex) -> tuple[np.ndarray, np.ndarray]:
    n_p = cx.pocket.array_length()
    pairs, orders = [], []
    if cx.pocket.bonds is not None:
        for a, b, _ in cx.pocket.bonds.as_array():
            pairs.append((int(a), int(b)))
            orders.append(1)
    mol = Chem.Mol(cx.ligand_mol)
    try:
        Chem.Kekulize(mol, clearAromaticFlags=True)
    except Exception:
        pass  # connectivity-only ligands have no aromatic flags to resolve
    for bond in mol.GetBonds():
        pairs.append((n_p + bond.GetBeginAtomIdx(), n_p + bond.GetEndAtomIdx()))
        orders.append({1.0: 1, 1.5: 1, 2.0: 2, 3.0: 3}.get(bond.GetBondTypeAsDouble(), 1))
    return np.array(pairs, dtype=int).reshape(-1, 2), np.array(orders, dtype=int)


def scene_from_complex(cx: Complex, view: str = "front", *, residues: list[ResidueKey] | None = None,
                       distance: float | None = None) -> Scene:
    """The complex in a canonical view, framed to fit (see :mod:`misi_agent.camera`).

    ``residues`` restricts the pocket to those residues (the residue–ligand task shows one).
    The frame's centre and distance come from the atoms actually displayed.
    """
    if view not in VIEW_NAMES:
        from misi_agent.camera import CommandError

        raise CommandError(f"unknown view {view!r} (expected one of {', '.join(VIEW_NAMES)})")
    res_index = cx.residue_index()
    keys = tuple(cx.residues())
    n_p = cx.pocket.array_length()
    world = np.concatenate([cx.pocket.coord, cx.ligand.coord]).astype(float)
    bonds, orders = _bond_arrays(cx)
    scene = Scene(
        pdb_id=cx.pdb_id,
        ligand_code=cx.ligand_code,
        coords=world,
        elements=np.concatenate([cx.pocket.element, cx.ligand.element]).astype(str),
        atom_names=np.concatenate([cx.pocket.atom_name, cx.ligand.atom_name]).astype(str),
        is_ligand=np.concatenate([np.zeros(n_p, bool), np.ones(cx.ligand.array_length(), bool)]),
        residue=np.concatenate([res_index, -np.ones(cx.ligand.array_length(), int)]),
        residue_keys=keys,
        bonds=bonds,
        bond_orders=orders,
    )
    if residues is not None:
        wanted = {keys.index(r) for r in residues}
        scene = scene.subset(scene.is_ligand | np.isin(scene.residue, list(wanted)))
    pts = scene.coords
    d = fit_distance(pts) if distance is None else distance
    return scene.with_coords(initial_view(pts, view, center=pts.mean(axis=0), distance=d))
