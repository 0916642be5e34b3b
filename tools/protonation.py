"""Protonation as a tool: explicit hydrogens for the pocket residues (PDBFixer + OpenMM, pH 7).

Why: ChimeraX places hydrogens only where heavy atoms fix them; rotatable groups (OH,
NH3+, SH) get none, so their D–H···A angle cannot be tested. With explicit hydrogens the
H-bond engine can test θ everywhere (``find_hbonds(..., explicit_h=...)``).

How, and why this way:
- Pocket fragments are not whole chains: protonating them alone would make every
  fragment start an NH3+ terminus and every fragment end a carboxylate. So the chains
  that hold pocket residues are protonated over a wide region (every residue within 12 Å
  of a pocket atom, which for most entries is nearly the whole chain), then the pocket
  residues are cut out: the artificial ends of the region are at least 12 Å from the pocket.
- Real chain breaks (disordered loops missing from the crystal, C···N > 2 Å) split a
  chain into fragments (TER records), so OpenMM neither bonds across the gap nor places
  the backbone H from a far-away carbon; a fragment start is an N-terminus (NH3+), as in
  ChimeraX, which types such a nitrogen N3+. Every fragment end gets an OXT (placed
  here in the carboxyl plane; Amber's C-terminal templates need it); such added atoms
  are not pocket atoms. A lone residue between two breaks is left out (no Amber template).
- Selenomethionine (MSE) is protonated as methionine; other modified residues and free
  (HETATM) amino acids get no hydrogens and split the chain (a note lists them).
- PDBFixer adds missing heavy atoms to incomplete residues within 8 Å of the pocket
  (incomplete residues farther away are left out like a break; no missing loops are
  modelled). PDBFixer's placement is sometimes poor (atoms nearly on top of each other);
  if the result then fails validation, the incomplete residues are left out instead and
  get no hydrogens (a note says so). OpenMM's
  ``Modeller.addHydrogens(pH=7, forcefield=Amber14)`` chooses variants (HID/HIE/HIP by
  H-bonding, CYX for disulfides, charged Lys/Arg/Asp/Glu), places hydrogens and minimises
  them with the heavy atoms fixed; Python's ``random`` is seeded for the initial placement.
  If Amber has no template for a residue, OpenMM's force-field-free placement is used and
  X–H lengths are reset to ideal values (a note says so). The ligand and waters are not
  part of the model, so rotatable hydrogens (OH, NH3+, SH) point wherever the protein
  alone puts them: they are NOT oriented towards the ligand.
- The result is validated: RDKit must read the protonated pocket, no two atoms may be
  closer than 0.9 Å, and every hydrogen sits 0.9–1.4 Å from its parent heavy atom.
  Anything else raises ProtonationError (a MisiError) with a one-line reason.
"""
from __future__ import annotations

import io
import random
import time
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np
import biotite.structure as struc

from misi_agent.errors import MisiError
from misi_agent.knowledge import STANDARD_RESIDUES
from misi_agent.structure import Complex, ResidueKey, read_atoms

TOOL_NAME = "protonate_pocket"
TOOL_DESCRIPTION = ("Explicit hydrogens for the binding-pocket residues at pH 7 (PDBFixer + OpenMM), validated; "
                    "returns hydrogen coordinates per pocket heavy atom.")
TOOL_INPUTS = {"structure": "path to an mmCIF/PDB entry", "ligand": "CCD code of the ligand (optional)"}

PEPTIDE_BOND_MAX = 2.0  # Å; a longer C···N gap is a chain break
MODEL_RADIUS = 12.0  # Å; residues farther from every pocket atom are left out of the model
NEAR_POCKET = 8.0  # Å; incomplete residues farther from the pocket are left out of the model
ATTEMPTS = 2  # tries: PDBFixer completion, then without the incomplete residues
RELAX_STEPS = 500  # extra hydrogen minimisation when OpenMM's 50 steps leave clashes
RELAX_RADIUS = 6.0  # Å around the pocket taken into that minimisation
MIN_ATOM_DISTANCE = 0.9  # Å; closer atoms mean a corrupt structure or a misplaced hydrogen
H_PARENT_RANGE = (0.9, 1.4)  # Å (S–H is 1.34 Å)
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
# Residues OpenMM has hydrogen definitions for (standard amino acids).
STANDARD = frozenset(STANDARD_RESIDUES)
# Modified residues protonated as their parent: (parent name, {atom name: parent atom name}, {element: element}).
ALIASES = {"MSE": ("MET", {"SE": "SD"}, {"SE": "S"})}


class ProtonationError(MisiError):
    """The pocket cannot be protonated or the result fails validation (one-line message)."""

    def __init__(self, message: str, retry: bool = False, geometric: bool = False):
        super().__init__(message)
        self.retry = retry  # another model (without PDBFixer's completion) may succeed
        self.geometric = geometric  # atoms too close / hydrogens at odd distances


@dataclass(frozen=True)
class ProtonatedPocket:
    """Explicit hydrogens for ``cx.pocket``.

    ``hydrogens[i]`` is an (n, 3) array of the hydrogens bonded to pocket atom ``i``
    (an empty (0, 3) array for atoms without hydrogens, every pocket atom has an entry);
    ``hydrogen_names[i]`` are their PDB names. ``variants`` gives the protonation state
    OpenMM chose for residues with a choice (HID/HIE/HIP, CYS/CYX, ASP/ASH, ...).
    """

    pdb_id: str
    hydrogens: dict[int, np.ndarray]
    hydrogen_names: dict[int, tuple[str, ...]]
    variants: dict[ResidueKey, str]
    added_heavy_atoms: tuple[str, ...]
    pdb_text: str  # the protonated pocket (heavy atoms + H) as PDB, as validated
    seconds: float
    notes: tuple[str, ...] = field(default=())

    @property
    def n_hydrogens(self) -> int:
        return int(sum(len(v) for v in self.hydrogens.values()))

    def explicit_h(self):
        """The hydrogens as the H-bond engine takes them (``find_hbonds(cx, explicit_h=...)``).

        The pocket side counts as completely protonated (atoms of residues that could not
        be protonated have no hydrogen); the ligand keeps the engine's heavy-atom behaviour.
        """
        from misi_agent.tools.hydrogens import ExplicitHydrogens
        return ExplicitHydrogens(pocket=self.hydrogens, ligand=None)

    def coordinates(self) -> np.ndarray:
        """All hydrogens, (n, 3), in pocket-atom order."""
        arrays = [self.hydrogens[i] for i in sorted(self.hydrogens)]
        return np.concatenate(arrays) if arrays else np.zeros((0, 3))


# ----------------------------------------------------------------------------- model building


@dataclass
class _Fragment:
    chain: str
    residues: list[tuple[ResidueKey, np.ndarray]]  # (key, atom rows in `atoms`)
    true_end: bool  # last residue is the real end of the chain (not a break)


def _residues(atoms: struc.AtomArray) -> list[tuple[ResidueKey, np.ndarray]]:
    starts = struc.get_residue_starts(atoms, add_exclusive_stop=True)
    out = []
    for a, b in zip(starts[:-1], starts[1:]):
        out.append((ResidueKey(str(atoms.chain_id[a]), int(atoms.res_id[a]), str(atoms.ins_code[a]),
                               str(atoms.res_name[a])), np.arange(a, b)))
    return out


def _atom(atoms: struc.AtomArray, rows: np.ndarray, name: str) -> np.ndarray | None:
    hit = rows[atoms.atom_name[rows] == name]
    return atoms.coord[hit[0]] if hit.size else None


@lru_cache(maxsize=64)
def _heavy_atom_names(name: str) -> frozenset[str]:
    """Heavy atoms of a standard residue inside a chain (CCD definition without OXT)."""
    import biotite.structure.info as info
    res = info.residue(name)
    return frozenset(str(n) for n, e in zip(res.atom_name, res.element) if e != "H" and n != "OXT")


def _is_complete(sub: struc.AtomArray, rows: np.ndarray, name: str) -> bool:
    parent, renames, _ = ALIASES.get(name, (name, {}, {}))
    present = {renames.get(str(n), str(n)) for n in sub.atom_name[rows]}
    return _heavy_atom_names(parent) <= present


def _fragments(atoms: struc.AtomArray, chains: set[str], pocket_xyz: np.ndarray | None = None,
               near: float = NEAR_POCKET) -> list[_Fragment]:
    """Standard amino-acid polymer residues of the given chains, split at chain breaks (fragments of 2+).

    With ``pocket_xyz``, only residues within MODEL_RADIUS of a pocket atom are modelled
    (the chain ends this makes are that far from the pocket), and residues with missing
    heavy atoms only within ``near`` Å (PDBFixer completes them); the others are left out
    like a chain break: PDBFixer's placement can be poor and they do not matter for the
    pocket's hydrogens.
    """
    from scipy.spatial import cKDTree
    tree = cKDTree(pocket_xyz) if pocket_xyz is not None and len(pocket_xyz) else None
    frags: list[_Fragment] = []
    for chain in sorted(chains):
        sub = atoms[atoms.chain_id == chain]
        # Polymer residues only: a HETATM amino acid is a free molecule (ligand, additive), not chain.
        residues = []
        for k, r in _residues(sub):
            if not ((k.name in STANDARD and not sub.hetero[r[0]]) or k.name in ALIASES):
                continue
            if tree is not None:
                dmin = tree.query(sub.coord[r], distance_upper_bound=MODEL_RADIUS)[0].min()
                if dmin > MODEL_RADIUS or (dmin > near and not _is_complete(sub, r, k.name)):
                    continue
            residues.append((k, r))
        current: list[tuple[ResidueKey, np.ndarray]] = []
        prev_c = None
        for key, rows in residues:
            n = _atom(sub, rows, "N")
            if current and (prev_c is None or n is None or np.linalg.norm(prev_c - n) > PEPTIDE_BOND_MAX):
                frags.append(_Fragment(chain, current, False))
                current = []
            current.append((key, rows))
            prev_c = _atom(sub, rows, "C")
        if current:
            frags.append(_Fragment(chain, current, True))
    # Rows were relative to the chain sub-array: make them absolute. A lone residue between
    # breaks is dropped: Amber has no template for a residue that is both N- and C-terminal.
    out = []
    for fr in frags:
        if len(fr.residues) < 2:
            continue
        base = np.flatnonzero(atoms.chain_id == fr.chain)
        out.append(_Fragment(fr.chain, [(k, base[r]) for k, r in fr.residues], fr.true_end))
    return out


def _terminal_oxygen(atoms: struc.AtomArray, rows: np.ndarray) -> np.ndarray | None:
    """OXT for a fragment's last residue, in the C's trigonal plane opposite CA and O (1.25 Å).

    Placed here rather than by PDBFixer, whose superposition can put OXT next to CA.
    """
    if (atoms.atom_name[rows] == "OXT").any():
        return None
    ca, c, o = (_atom(atoms, rows, n) for n in ("CA", "C", "O"))
    if ca is None or c is None or o is None:
        return None
    u = (c - ca) / np.linalg.norm(c - ca) + (c - o) / np.linalg.norm(c - o)
    if np.linalg.norm(u) < 1e-3:
        return None
    return c + 1.25 * u / np.linalg.norm(u)


def _pdb_name(name: str, element: str) -> str:
    if len(name) < 4 and len(element) == 1:
        return f" {name:<3}"
    return f"{name:<4}"[:4]


def _model_pdb(atoms: struc.AtomArray, frags: list[_Fragment]) -> str:
    """One TER-separated PDB chain per fragment, so OpenMM never bonds across a break."""
    if len(frags) > 9999:
        raise ProtonationError("too many chain fragments to protonate")
    lines = []
    serial = 0
    for f_idx, fr in enumerate(frags):
        letter = _LETTERS[f_idx % len(_LETTERS)]
        for r_idx, (key, rows) in enumerate(fr.residues):
            resname, names, elements = ALIASES.get(key.name, (key.name, {}, {}))
            entries = []
            for i in rows:
                name, el = str(atoms.atom_name[i]), str(atoms.element[i]).upper()
                entries.append((names.get(name, name), elements.get(el, el), atoms.coord[i]))
            if r_idx == len(fr.residues) - 1:
                oxt = _terminal_oxygen(atoms, rows)
                if oxt is not None:
                    entries.append(("OXT", "O", oxt))
            for name, el, xyz in entries:
                serial += 1
                x, y, z = (float(v) for v in xyz)
                # Residue numbers are sequential per fragment: the mapping back uses positions.
                lines.append(f"ATOM  {serial % 100000:>5} {_pdb_name(name, el)} {resname:>3} "
                             f"{letter}{(r_idx + 1) % 10000:>4}    {x:8.3f}{y:8.3f}{z:8.3f}  1.00  0.00          {el:>2}")
        lines.append("TER")
    lines.append("END")
    return "\n".join(lines) + "\n"


def _protonate_model(pdb_text: str, frags: list[_Fragment], ph: float, seed: int):
    """PDBFixer (missing heavy atoms) + Modeller.addHydrogens with Amber14 (hydrogens minimised, heavy atoms fixed).

    Returns (topology, positions in Å, variants, added heavy atoms, notes).
    """
    from openmm import unit
    from openmm.app import Modeller
    from pdbfixer import PDBFixer

    fixer = PDBFixer(pdbfile=io.StringIO(pdb_text), platform=_platform())
    chains = list(fixer.topology.chains())
    if len(chains) != len(frags):
        raise ProtonationError(f"OpenMM read {len(chains)} chains for {len(frags)} fragments")
    fixer.missingResidues = {}  # never model missing loops
    fixer.findMissingAtoms()  # also an OXT at every fragment end: Amber's C-terminal templates need it
    added = []
    for res, atoms in fixer.missingAtoms.items():
        added.extend(f"{res.chain.index}:{res.index}:{a.name}" for a in atoms)
    if fixer.missingAtoms or fixer.missingTerminals:
        fixer.addMissingAtoms(seed=seed or 1)  # OpenMM treats seed 0 as 'pick a random seed'
    state = random.getstate()
    notes = []
    try:
        modeller = Modeller(fixer.topology, fixer.positions)
        random.seed(seed)
        try:
            variants = modeller.addHydrogens(forcefield=_forcefield(), pH=ph, platform=_platform())
        except Exception as exc:  # e.g. a residue Amber has no template for
            notes.append(f"Amber14 placement failed ({type(exc).__name__}); geometric placement, bond lengths reset")
            modeller = Modeller(fixer.topology, fixer.positions)
            random.seed(seed)
            variants = modeller.addHydrogens(pH=ph, platform=_platform())
    finally:
        random.setstate(state)
    positions = np.array(modeller.positions.value_in_unit(unit.angstrom), dtype=float)
    if notes:
        _reset_h_lengths(modeller.topology, positions)
    return modeller.topology, positions, variants, added, notes


@lru_cache(maxsize=1)
def _platform():
    """OpenMM's CPU platform with deterministic force summation (same hydrogens every run)."""
    import openmm
    platform = openmm.Platform.getPlatformByName("CPU")
    platform.setPropertyDefaultValue("DeterministicForces", "true")
    platform.setPropertyDefaultValue("Threads", "1")  # Langevin noise differs with more threads
    return platform


@lru_cache(maxsize=1)
def _forcefield():
    from openmm.app import ForceField
    return ForceField("amber14-all.xml")


_XH = {"C": 1.09, "N": 1.01, "O": 0.96, "S": 1.34}


def _reset_h_lengths(topology, positions: np.ndarray) -> None:
    """Put every hydrogen at the ideal X–H length along its current direction (in place)."""
    for a, b in topology.bonds():
        h, x = (a, b) if a.element is not None and a.element.symbol == "H" else (b, a)
        if h.element is None or h.element.symbol != "H" or x.element is None or x.element.symbol == "H":
            continue
        v = positions[h.index] - positions[x.index]
        n = np.linalg.norm(v)
        if n > 0:
            positions[h.index] = positions[x.index] + v / n * _XH.get(x.element.symbol, 1.0)


# ----------------------------------------------------------------------------- validation


def _validation_pdb(records: list[tuple[str, str, str, int, str, np.ndarray, int]]) -> str:
    lines = []
    for k, (name, el, resn, resi, chain, xyz, charge) in enumerate(records, start=1):
        ch = f"{abs(charge)}{'+' if charge > 0 else '-'}" if charge else "  "
        lines.append(f"ATOM  {k % 100000:>5} {_pdb_name(name, el)} {resn:>3} {chain}{resi % 10000:>4}    "
                     f"{xyz[0]:8.3f}{xyz[1]:8.3f}{xyz[2]:8.3f}  1.00  0.00          {el:>2}{ch}")
    lines.append("END")
    return "\n".join(lines) + "\n"


def validate_protonated(coords: np.ndarray, elements: list[str], parents: np.ndarray, pdb_text: str) -> None:
    """Raise ProtonationError unless the protonated pocket is chemically sane.

    ``parents[i]`` is the index of hydrogen ``i``'s heavy atom (-1 for heavy atoms).
    Checks: no two atoms closer than 0.9 Å; every H 0.9–1.4 Å from its parent; RDKit reads
    and sanitizes the PDB text with the same number of atoms.
    """
    from rdkit import Chem
    from scipy.spatial import cKDTree

    coords = np.asarray(coords, float)
    if coords.size and not np.isfinite(coords).all():
        raise ProtonationError("non-finite coordinates after protonation")
    pairs = cKDTree(coords).query_pairs(MIN_ATOM_DISTANCE, output_type="ndarray")
    if len(pairs):
        i, j = pairs[0]
        d = float(np.linalg.norm(coords[i] - coords[j]))
        raise ProtonationError(f"{len(pairs)} atom pair(s) closer than {MIN_ATOM_DISTANCE} Å after protonation "
                               f"(e.g. atoms {i} and {j}: {d:.2f} Å)", geometric=True)
    h = np.flatnonzero(parents >= 0)
    if h.size:
        d = np.linalg.norm(coords[h] - coords[parents[h]], axis=1)
        bad = (d < H_PARENT_RANGE[0]) | (d > H_PARENT_RANGE[1])
        if bad.any():
            raise ProtonationError(f"{int(bad.sum())} hydrogen(s) not {H_PARENT_RANGE[0]}–{H_PARENT_RANGE[1]} Å "
                                   f"from their parent atom", geometric=True)
    mol = Chem.MolFromPDBBlock(pdb_text, removeHs=False, sanitize=True)
    if mol is None:
        raise ProtonationError("RDKit cannot read or sanitize the protonated pocket")
    if mol.GetNumAtoms() != len(elements):
        raise ProtonationError(f"RDKit read {mol.GetNumAtoms()} atoms, expected {len(elements)}")


# ----------------------------------------------------------------------------- the tool


def protonate_pocket(cx: Complex, ph: float = 7.0, seed: int = 0) -> ProtonatedPocket:
    """Explicit hydrogens for every pocket heavy atom of ``cx`` (see the module docstring).

    PDBFixer completes residues with missing heavy atoms near the pocket. Its placement can
    be poor (atoms on top of each other); when the result then fails validation, another
    seed is tried, and finally the incomplete residues are left out of the model (they get
    no hydrogens, a note says so). Other failures raise ProtonationError at once.
    """
    t0 = time.perf_counter()
    full = read_atoms(cx.source)
    pocket_keys = {k: i for i, k in enumerate(cx.residues())}
    chains = {k.chain for k in pocket_keys}
    plans = [(NEAR_POCKET, seed + k) for k in range(ATTEMPTS - 1)] + [(-1.0, seed)]
    errors: list[str] = []
    for near, plan_seed in plans:
        notes: list[str] = []
        frags = _fragments(full, chains, cx.pocket.coord, near)
        modelled = {k for fr in frags for k, _ in fr.residues}
        skipped = [k for k in pocket_keys if k not in modelled]
        if skipped:
            notes.append("no hydrogens for non-standard, non-polymer, isolated" + (" or incomplete" if near < 0 else "")
                         + " residues: " + ", ".join(sorted({k.label() for k in skipped})))
        if not modelled & set(pocket_keys):
            raise ProtonationError(f"{cx.pdb_id}: no standard amino-acid residue in the pocket to protonate")
        ends = [k for fr in frags for k in {fr.residues[0][0], fr.residues[-1][0]} if k in pocket_keys]
        if ends:
            notes.append("pocket residues at a chain end or break, protonated as charged termini: "
                         + ", ".join(k.label() for k in sorted(ends, key=lambda k: (k.chain, k.number, k.ins_code))))
        try:
            result = _attempt(cx, _model_pdb(full, frags), frags, pocket_keys, ph, plan_seed)
        except ProtonationError as exc:
            if not exc.retry:
                raise
            errors.append(str(exc))
            continue
        if errors:
            notes.append(f"PDBFixer's completion failed validation {len(errors)} time(s) ({errors[-1]}); "
                         + ("another seed worked" if near >= 0 else "incomplete residues left out"))
        return replace(result, seconds=time.perf_counter() - t0, notes=tuple(notes + list(result.notes)))
    raise ProtonationError(errors[-1])


def _attempt(cx: Complex, model: str, frags: list[_Fragment], pocket_keys: dict[ResidueKey, int], ph: float,
             seed: int) -> ProtonatedPocket:
    """One protonation; ProtonationError.retry says whether a model without PDBFixer's atoms may help."""
    notes: list[str] = []
    try:
        topology, pos, variants, added, model_notes = _protonate_model(model, frags, ph, seed)
        notes.extend(model_notes)
    except ProtonationError:
        raise
    except Exception as exc:
        msg = str(exc).splitlines()[0] if str(exc) else ""
        raise ProtonationError(f"{cx.pdb_id}: OpenMM/PDBFixer failed ({type(exc).__name__}: {msg})") from None

    # Map OpenMM residues back by position (chain order = fragment order, residue order kept).
    omm_res = [list(ch.residues()) for ch in topology.chains()]
    if len(omm_res) != len(frags) or any(len(r) != len(f.residues) for r, f in zip(omm_res, frags)):
        raise ProtonationError(f"{cx.pdb_id}: OpenMM changed the residue layout")
    try:
        return _collect(cx, topology, pos, variants, frags, omm_res, pocket_keys, notes)
    except ProtonationError as exc:
        amber_failed = bool(model_notes)  # then Amber cannot relax the hydrogens either
        if not exc.geometric or amber_failed:
            raise ProtonationError(f"{cx.pdb_id}: {exc}", retry=bool(added)) from None
        first = exc
    # OpenMM minimises new hydrogens for only 50 steps; crowded ones can stay too close. Relax longer.
    try:
        pos = _relax_hydrogens(topology, pos, cx.pocket.coord)
    except Exception as exc:
        raise ProtonationError(f"{cx.pdb_id}: {first} (relaxing failed: {type(exc).__name__})",
                               retry=bool(added)) from None
    notes.append(f"hydrogens re-minimised ({RELAX_STEPS} steps) after OpenMM's placement left clashes")
    try:
        return _collect(cx, topology, pos, variants, frags, omm_res, pocket_keys, notes)
    except ProtonationError as exc:
        raise ProtonationError(f"{cx.pdb_id}: {exc}", retry=bool(added)) from None


def _relax_hydrogens(topology, positions: np.ndarray, pocket_xyz: np.ndarray) -> np.ndarray:
    """Minimise the hydrogens near the pocket (Amber14, everything else fixed) for up to RELAX_STEPS steps.

    Only residues within RELAX_RADIUS of a pocket atom take part (external bonds ignored),
    which keeps this affordable for large proteins; the other positions are unchanged.
    """
    import openmm
    from openmm import unit
    from openmm.app import CutoffNonPeriodic, Modeller
    from scipy.spatial import cKDTree
    tree = cKDTree(pocket_xyz)
    keep_res = set()
    for res in topology.residues():
        idx = [a.index for a in res.atoms()]
        if tree.query(positions[idx], distance_upper_bound=RELAX_RADIUS)[0].min() <= RELAX_RADIUS:
            keep_res.add(res.index)
    kept = [a.index for a in topology.atoms() if a.residue.index in keep_res]
    sub = Modeller(topology, positions * unit.angstrom)
    sub.delete([r for r in topology.residues() if r.index not in keep_res])
    system = _forcefield().createSystem(sub.topology, nonbondedMethod=CutoffNonPeriodic, constraints=None,
                                        rigidWater=False, ignoreExternalBonds=True)
    for atom in sub.topology.atoms():
        if atom.element is None or atom.element.symbol != "H":
            system.setParticleMass(atom.index, 0.0)
    context = openmm.Context(system, openmm.VerletIntegrator(0.0), _platform())
    context.setPositions(sub.positions)
    openmm.LocalEnergyMinimizer.minimize(context, 1.0, RELAX_STEPS)
    relaxed = context.getState(getPositions=True).getPositions().value_in_unit(unit.angstrom)
    del context
    out = positions.copy()
    out[kept] = np.array(relaxed, dtype=float)
    return out


def _collect(cx: Complex, topology, pos: np.ndarray, variants, frags: list[_Fragment], omm_res,
             pocket_keys: dict[ResidueKey, int], notes: list[str]) -> ProtonatedPocket:
    """The pocket's hydrogens from the protonated model, validated (ProtonationError otherwise)."""
    variant_iter = iter(variants)
    pocket = cx.pocket
    pocket_index = {}
    for i in range(pocket.array_length()):
        pocket_index[(str(pocket.chain_id[i]), int(pocket.res_id[i]), str(pocket.ins_code[i]),
                      str(pocket.res_name[i]), str(pocket.atom_name[i]))] = i
    hydrogens: dict[int, list[np.ndarray]] = {i: [] for i in range(pocket.array_length())}
    h_names: dict[int, list[str]] = {i: [] for i in range(pocket.array_length())}
    chosen: dict[ResidueKey, str] = {}
    bonded: dict[int, list] = {}
    for a, b in topology.bonds():
        bonded.setdefault(a.index, []).append(b)
        bonded.setdefault(b.index, []).append(a)
    # Validation model: the pocket residues as protonated (heavy atoms + H, including atoms PDBFixer added).
    records: list[tuple[str, str, str, int, str, np.ndarray, int]] = []
    parents: list[int] = []
    added_pocket: list[str] = []
    for f_idx, (fr, residues) in enumerate(zip(frags, omm_res)):
        for (key, _rows), res in zip(fr.residues, residues):
            variant = next(variant_iter, None)
            if key not in pocket_keys:
                continue
            if variant and variant != key.name:
                chosen[key] = variant
            chain = _LETTERS[f_idx % len(_LETTERS)]
            back = {v: k for k, v in ALIASES.get(key.name, ("", {}, {}))[1].items()}
            heavy_pos: dict[int, int] = {}
            for atom in res.atoms():
                if atom.element is not None and atom.element.symbol == "H":
                    continue
                heavy_pos[atom.index] = len(records)
                orig_name = back.get(atom.name, atom.name)
                n_h = sum(1 for o in bonded.get(atom.index, []) if o.element is not None and o.element.symbol == "H")
                heavy_nb = [o for o in bonded.get(atom.index, []) if o.element is None or o.element.symbol != "H"]
                charge = 1 if atom.element.symbol == "N" and n_h + len(heavy_nb) == 4 else 0
                records.append((atom.name, atom.element.symbol.upper(), res.name, res.index, chain, pos[atom.index], charge))
                parents.append(-1)
                k = (key.chain, key.number, key.ins_code, key.name, orig_name)
                if k not in pocket_index:
                    added_pocket.append(f"{key.label()} {atom.name}")
            for atom in res.atoms():
                if atom.element is None or atom.element.symbol != "H":
                    continue
                parent = next((o for o in bonded.get(atom.index, []) if o.index in heavy_pos), None)
                if parent is None:
                    raise ProtonationError(f"{cx.pdb_id}: hydrogen {atom.name} of {key.label()} has no parent atom")
                records.append((atom.name, "H", res.name, res.index, chain, pos[atom.index], 0))
                parents.append(heavy_pos[parent.index])
                k = (key.chain, key.number, key.ins_code, key.name, back.get(parent.name, parent.name))
                if k in pocket_index:
                    hydrogens[pocket_index[k]].append(pos[atom.index])
                    h_names[pocket_index[k]].append(atom.name)
    text = _validation_pdb(records)
    validate_protonated(np.array([r[5] for r in records]), [r[1] for r in records], np.array(parents), text)
    extra = []
    if added_pocket:
        extra.append(f"{len(added_pocket)} heavy atom(s) added to pocket residues (PDBFixer; OXT at fragment ends): "
                     + ", ".join(added_pocket[:6]) + (" ..." if len(added_pocket) > 6 else ""))
    return ProtonatedPocket(
        pdb_id=cx.pdb_id,
        hydrogens={i: (np.array(v, dtype=float).reshape(-1, 3)) for i, v in hydrogens.items()},
        hydrogen_names={i: tuple(v) for i, v in h_names.items()},
        variants=chosen, added_heavy_atoms=tuple(added_pocket), pdb_text=text,
        seconds=0.0, notes=tuple(notes + extra))
