"""Load and validate the H-bond knowledge tables (criteria, atom types, residue templates).

``hbond_criteria.yaml`` holds STRICT values of the ChimeraX / Mills & Dean criteria plus the
tolerance rule; :meth:`HBondCriteria.resolved` applies the rule for a mode ("strict" or
"relaxed"). ``residue_templates.yaml`` types every heavy atom of the standard amino acids.
Loaders check required keys, numeric ranges and cross references when a table is read and
raise :class:`KnowledgeError` (one line) on any problem, so a bad edit fails loudly.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from misi_agent.knowledge import KNOWLEDGE_DIR, KnowledgeError, read_table

CRITERIA_FILE = "hbond_criteria.yaml"
TEMPLATES_FILE = "residue_templates.yaml"

ACCEPTOR_TESTS = {
    "syn_anti": {"distance", "phi_min", "theta_min"},
    "phi_psi": {"distance", "phi_min", "theta_min"},
    "theta_tau": {"distance", "upsilon_min", "upsilon_max", "theta_min"},
    "generic": {"distance", "angle_min"},
}
DONOR_TESTS = ("upsilon_tau", "theta_tau", "generic")
ACCEPTOR_CLASSES = ("sp2_O", "sp3_O", "sp3_N", "other")
ROLES = ("donor", "acceptor", "both", "none")
MAX_DISTANCE = 6.0


def _fail(where: str, message: str) -> KnowledgeError:
    return KnowledgeError(f"{where}: {message}")


# ----------------------------------------------------------------------------- tolerance


def relax_value(key: str, value: float | None, distance_tol: float, angle_tol: float) -> float | None:
    """Apply the tolerance rule to one value named ``key``.

    Distances (``distance``, ``h_distance``) grow by ``distance_tol``; ``*_min`` angles
    shrink by ``angle_tol`` (not below 0); ``*_max`` angles grow (not above 180).
    """
    if value is None:
        return None
    if key in ("distance", "h_distance"):
        return value + distance_tol
    if key.endswith("_min"):
        return max(0.0, value - angle_tol)
    if key.endswith("_max"):
        return min(180.0, value + angle_tol)
    return value


def relax_params(params: Mapping[str, float], distance_tol: float, angle_tol: float) -> dict[str, float]:
    """Apply :func:`relax_value` to every entry of a parameter set."""
    return {k: relax_value(k, v, distance_tol, angle_tol) for k, v in params.items()}


# ----------------------------------------------------------------------------- criteria


@dataclass(frozen=True)
class AcceptorGroup:
    """One acceptor row: ``test`` is syn_anti, phi_psi, theta_tau or generic.

    ``params`` holds one parameter set (``syn``/``anti`` for syn_anti); ``partner`` says
    whether theta_tau's upsilon is measured from the bonded atom or the lone pairs.
    """

    id: str
    name: str
    test: str
    params: Mapping[str, Mapping[str, float]]
    partner: str | None
    source: str


@dataclass(frozen=True)
class DonorGroup:
    """One donor row: one parameter set per acceptor class (sp2_O, sp3_O, sp3_N, other)."""

    id: str
    name: str
    test: str
    classes: Mapping[str, Mapping[str, float]]
    tau_symmetry: int | None
    theta_min: float | None
    bonded_angle_min: float | None
    source: str


@dataclass(frozen=True)
class ResolvedCriteria:
    """Criteria with the tolerance of one mode applied (what the geometry tests read)."""

    mode: str
    acceptors: Mapping[str, AcceptorGroup]
    donors: Mapping[str, DonorGroup]
    sulfur_distance: float
    metal_radius: float
    metal_min_angle: float
    hydrogen_bond_lengths: Mapping[str, float]

    @property
    def max_distance(self) -> float:
        """Largest D···A (or H···A + 1.1 Å) any row can accept, sulfur included: the search radius."""
        best = 0.0
        for g in self.acceptors.values():
            for p in g.params.values():
                best = max(best, p["distance"])
        for g in self.donors.values():
            for p in g.classes.values():
                if "distance" in p:
                    best = max(best, p["distance"])
                if "h_distance" in p:
                    best = max(best, p["h_distance"] + 1.1)
        return best + self.sulfur_distance + 0.05


@dataclass(frozen=True)
class HBondCriteria:
    """The validated STRICT criteria table and its tolerance rule."""

    path: Path
    modes: Mapping[str, tuple[float, float]]
    sulfur_distance: float
    metal_radius: float
    metal_min_angle: float
    hydrogen_bond_lengths: Mapping[str, float]
    acceptors: Mapping[str, AcceptorGroup]
    donors: Mapping[str, DonorGroup]
    _resolved: dict = field(default_factory=dict, repr=False, compare=False)

    def with_mode(self, mode: str, distance: float, angle: float) -> HBondCriteria:
        """These criteria with one more tolerance mode, ``distance`` Å and ``angle`` degrees added to the strict
        values by the same rule as the table's modes (for points known less well than a deposited structure's,
        such as a reconstruction from pictures)."""
        from dataclasses import replace

        tolerance = (_number(f"tolerance mode {mode}: distance", distance, 0, 2.0),
                     _number(f"tolerance mode {mode}: angle", angle, 0, 90.0))
        return replace(self, modes=MappingProxyType({**self.modes, mode: tolerance}), _resolved={})

    def resolved(self, mode: str = "relaxed") -> ResolvedCriteria:
        """The criteria of ``mode`` (a key of ``tolerance.modes``), tolerance applied."""
        if mode not in self.modes:
            raise KnowledgeError(f"unknown H-bond criteria mode '{mode}' (expected one of: {', '.join(sorted(self.modes))})")
        if mode in self._resolved:
            return self._resolved[mode]
        dt, at = self.modes[mode]
        acc = {}
        for gid, g in self.acceptors.items():
            acc[gid] = AcceptorGroup(g.id, g.name, g.test,
                                     MappingProxyType({k: MappingProxyType(relax_params(p, dt, at)) for k, p in g.params.items()}),
                                     g.partner, g.source)
        don = {}
        for gid, g in self.donors.items():
            don[gid] = DonorGroup(g.id, g.name, g.test,
                                  MappingProxyType({k: MappingProxyType(relax_params(p, dt, at)) for k, p in g.classes.items()}),
                                  g.tau_symmetry, relax_value("theta_min", g.theta_min, dt, at),
                                  relax_value("bonded_angle_min", g.bonded_angle_min, dt, at), g.source)
        out = ResolvedCriteria(mode, MappingProxyType(acc), MappingProxyType(don), self.sulfur_distance,
                               self.metal_radius, self.metal_min_angle, self.hydrogen_bond_lengths)
        self._resolved[mode] = out
        return out


def _number(where: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(where, f"expected a number, got {value!r}")
    if not lo <= float(value) <= hi:
        raise _fail(where, f"{value} is outside [{lo}, {hi}]")
    return float(value)


def _check_param_set(where: str, params: Any, required: set[str], optional: set[str] = frozenset()) -> dict[str, float]:
    if not isinstance(params, dict):
        raise _fail(where, "expected a mapping of parameters")
    missing = required - params.keys()
    if missing:
        raise _fail(where, f"missing {', '.join(sorted(missing))}")
    unknown = params.keys() - required - optional
    if unknown:
        raise _fail(where, f"unknown key(s) {', '.join(sorted(unknown))}")
    out = {}
    for key, value in params.items():
        if key in ("distance", "h_distance"):
            out[key] = _number(f"{where}.{key}", value, 0.5, MAX_DISTANCE)
        else:
            out[key] = _number(f"{where}.{key}", value, 0.0, 180.0)
    if "upsilon_min" in out and "upsilon_max" in out and out["upsilon_min"] > out["upsilon_max"]:
        raise _fail(where, "upsilon_min is larger than upsilon_max")
    if "tau_min" in out and "tau_max" in out:
        raise _fail(where, "give tau_min or tau_max, not both")
    return out


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, "expected a non-empty string")
    return value


def _parse_acceptor(where: str, row: Any) -> AcceptorGroup:
    if not isinstance(row, dict):
        raise _fail(where, "expected a mapping")
    gid = _text(f"{where}.id", row.get("id"))
    where = f"acceptor '{gid}'"
    test = row.get("test")
    if test not in ACCEPTOR_TESTS:
        raise _fail(where, f"test must be one of {', '.join(ACCEPTOR_TESTS)}, got {test!r}")
    allowed = {"id", "name", "test", "source", "partner", "params", "syn", "anti"}
    unknown = row.keys() - allowed
    if unknown:
        raise _fail(where, f"unknown key(s) {', '.join(sorted(unknown))}")
    required = ACCEPTOR_TESTS[test]
    if test == "syn_anti":
        params = {k: _check_param_set(f"{where}.{k}", row.get(k), required) for k in ("syn", "anti")}
    else:
        params = {"params": _check_param_set(f"{where}.params", row.get("params"), required)}
    partner = row.get("partner")
    if test == "theta_tau":
        if partner not in ("bonded", "lone_pairs"):
            raise _fail(where, "theta_tau acceptors need partner: bonded or lone_pairs")
    elif partner is not None:
        raise _fail(where, "partner applies to theta_tau acceptors only")
    return AcceptorGroup(gid, _text(f"{where}.name", row.get("name")), test,
                         MappingProxyType({k: MappingProxyType(v) for k, v in params.items()}), partner,
                         _text(f"{where}.source", row.get("source")))


def _parse_donor(where: str, row: Any) -> DonorGroup:
    if not isinstance(row, dict):
        raise _fail(where, "expected a mapping")
    gid = _text(f"{where}.id", row.get("id"))
    where = f"donor '{gid}'"
    test = row.get("test")
    if test not in DONOR_TESTS:
        raise _fail(where, f"test must be one of {', '.join(DONOR_TESTS)}, got {test!r}")
    allowed = {"id", "name", "test", "source", "tau_symmetry", "theta_min", "bonded_angle_min", *ACCEPTOR_CLASSES}
    unknown = row.keys() - allowed
    if unknown:
        raise _fail(where, f"unknown key(s) {', '.join(sorted(unknown))}")
    classes = {}
    tau_sym = None
    theta_min = bonded_min = None
    for cls in ACCEPTOR_CLASSES:
        w = f"{where}.{cls}"
        if test == "upsilon_tau":
            req = {"distance", "upsilon_min", "upsilon_max", "theta_min"}
            opt = {"tau_min", "tau_max"} if cls != "other" else set()
            if cls == "sp3_N":
                opt = opt | {"lone_pair_upsilon_min"}
        elif test == "theta_tau":
            req = {"h_distance", "theta_min"}
            opt = {"sp3_O": {"phi_min"}, "sp3_N": {"lone_pair_angle_min"}}.get(cls, set())
        else:
            req, opt = {"h_distance", "distance"}, set()
        classes[cls] = _check_param_set(w, row.get(cls), req, opt)
    if test == "upsilon_tau":
        tau_sym = row.get("tau_symmetry")
        if tau_sym not in (2, 4, 6):
            raise _fail(where, "upsilon_tau donors need tau_symmetry 2, 4 or 6")
    elif "tau_symmetry" in row:
        raise _fail(where, "tau_symmetry applies to upsilon_tau donors only")
    if test == "generic":
        theta_min = _number(f"{where}.theta_min", row.get("theta_min"), 0, 180)
        bonded_min = _number(f"{where}.bonded_angle_min", row.get("bonded_angle_min"), 0, 180)
    elif "theta_min" in row or "bonded_angle_min" in row:
        raise _fail(where, "theta_min / bonded_angle_min at row level apply to generic donors only")
    return DonorGroup(gid, _text(f"{where}.name", row.get("name")), test,
                      MappingProxyType({k: MappingProxyType(v) for k, v in classes.items()}),
                      tau_sym, theta_min, bonded_min, _text(f"{where}.source", row.get("source")))


def parse_criteria(table: Mapping[str, Any], path: Path) -> HBondCriteria:
    """Validate a criteria table read from YAML (see :func:`load_criteria`)."""
    where = path.name
    try:
        tol = table["tolerance"]
        modes_raw = tol["modes"]
        _text(f"{where}: tolerance.source", tol.get("source"))
        modes = {}
        for mode, v in modes_raw.items():
            modes[str(mode)] = (_number(f"{where}: tolerance.modes.{mode}.distance", v["distance"], 0, 2.0),
                                _number(f"{where}: tolerance.modes.{mode}.angle", v["angle"], 0, 90.0))
        sulfur = _number(f"{where}: tolerance.sulfur_distance", tol["sulfur_distance"], 0, 2.0)
        metal = table["metal"]
        _text(f"{where}: metal.source", metal.get("source"))
        metal_radius = _number(f"{where}: metal.acceptor_radius", metal["acceptor_radius"], 0, 10.0)
        metal_angle = _number(f"{where}: metal.min_angle", metal["min_angle"], 0, 180.0)
        hbl_raw = table["hydrogen_bond_lengths"]
        hbl = {el: _number(f"{where}: hydrogen_bond_lengths.{el}", v, 0.5, 2.0)
               for el, v in hbl_raw.items() if el != "source"}
        acc_rows = table["acceptors"]
        don_rows = table["donors"]
    except KnowledgeError:
        raise
    except (KeyError, TypeError, AttributeError) as exc:
        raise KnowledgeError(f"{where}: missing or malformed section ({type(exc).__name__}: {exc})") from None
    for mode in ("strict", "relaxed"):
        if mode not in modes:
            raise KnowledgeError(f"{where}: tolerance.modes needs '{mode}'")
    for el in ("N", "O", "S"):
        if el not in hbl:
            raise KnowledgeError(f"{where}: hydrogen_bond_lengths needs {el}")
    if not isinstance(acc_rows, list) or not isinstance(don_rows, list):
        raise KnowledgeError(f"{where}: acceptors and donors must be lists")
    acceptors: dict[str, AcceptorGroup] = {}
    for i, row in enumerate(acc_rows):
        g = _parse_acceptor(f"{where}: acceptors[{i}]", row)
        if g.id in acceptors:
            raise KnowledgeError(f"{where}: duplicate acceptor id '{g.id}'")
        acceptors[g.id] = g
    donors: dict[str, DonorGroup] = {}
    for i, row in enumerate(don_rows):
        g = _parse_donor(f"{where}: donors[{i}]", row)
        if g.id in donors:
            raise KnowledgeError(f"{where}: duplicate donor id '{g.id}'")
        donors[g.id] = g
    return HBondCriteria(path, MappingProxyType(modes), sulfur, metal_radius, metal_angle, MappingProxyType(hbl),
                         MappingProxyType(acceptors), MappingProxyType(donors))


def load_criteria(path: str | Path | None = None) -> HBondCriteria:
    """Read and validate ``hbond_criteria.yaml`` (the packaged one, or ``path``).

    The packaged table is cached; a ``path`` is read every time (so edited copies are seen).
    """
    if path is None:
        return _default_criteria()
    p = Path(path)
    return parse_criteria(read_table(p.name, p.parent), p)


@lru_cache(maxsize=1)
def _default_criteria() -> HBondCriteria:
    p = KNOWLEDGE_DIR / CRITERIA_FILE
    return parse_criteria(read_table(CRITERIA_FILE), p)


# ----------------------------------------------------------------------------- templates


@dataclass(frozen=True)
class AtomTemplate:
    """One template atom: IDATM type, H-bond role and group ids (None where not applicable)."""

    name: str
    type: str
    role: str
    donor: str | None
    acceptor: str | None


@dataclass(frozen=True)
class ResidueTemplates:
    """Atom types (geometry, substituents), the backbone and the per-residue templates."""

    atom_types: Mapping[str, tuple[int, int]]
    backbone: Mapping[str, AtomTemplate]
    residues: Mapping[str, Mapping[str, AtomTemplate]]
    bases: Mapping[str, str]

    def atom(self, residue: str, atom: str) -> AtomTemplate | None:
        """The template of ``atom`` in ``residue`` (side chain first, then backbone), or None."""
        res = self.residues.get(residue)
        if res is None:
            return None
        return res.get(atom) or self.backbone.get(atom)


_ELEMENT_ONLY = {"Se", "Br", "Cl", "F", "I", "Zn", "Fe", "Mg"}


def _parse_atom(where: str, name: str, entry: Any, types: Mapping[str, tuple[int, int]],
                criteria: HBondCriteria) -> AtomTemplate:
    if not isinstance(entry, dict):
        raise _fail(where, "expected a mapping")
    unknown = entry.keys() - {"type", "role", "donor", "acceptor"}
    if unknown:
        raise _fail(where, f"unknown key(s) {', '.join(sorted(unknown))}")
    t = entry.get("type")
    role = entry.get("role", "none")
    if role not in ROLES:
        raise _fail(where, f"role must be one of {', '.join(ROLES)}, got {role!r}")
    if t not in types and not (t in _ELEMENT_ONLY and role == "none"):
        raise _fail(where, f"unknown atom type {t!r}")
    donor, acceptor = entry.get("donor"), entry.get("acceptor")
    if (role in ("donor", "both")) != (donor is not None):
        raise _fail(where, f"role '{role}' and donor group {donor!r} disagree")
    if (role in ("acceptor", "both")) != (acceptor is not None):
        raise _fail(where, f"role '{role}' and acceptor group {acceptor!r} disagree")
    if donor is not None and donor not in criteria.donors:
        raise _fail(where, f"donor group '{donor}' is not in {CRITERIA_FILE}")
    if acceptor is not None and acceptor not in criteria.acceptors:
        raise _fail(where, f"acceptor group '{acceptor}' is not in {CRITERIA_FILE}")
    return AtomTemplate(name, t, role, donor, acceptor)


def parse_templates(table: Mapping[str, Any], criteria: HBondCriteria, where: str = TEMPLATES_FILE) -> ResidueTemplates:
    """Validate a residue-template table against ``criteria`` (every group must exist)."""
    try:
        at = table["atom_types"]
        _text(f"{where}: atom_types.source", at.get("source"))
        types = {}
        for t, v in at["types"].items():
            if not (isinstance(v, list) and len(v) == 2):
                raise KnowledgeError(f"{where}: atom type {t} needs [geometry, substituents]")
            types[str(t)] = (int(_number(f"{where}: {t}.geometry", v[0], 1, 4)),
                             int(_number(f"{where}: {t}.substituents", v[1], 0, 4)))
        bb_raw = table["backbone"]
        res_raw = table["residues"]
    except KnowledgeError:
        raise
    except (KeyError, TypeError, AttributeError) as exc:
        raise KnowledgeError(f"{where}: missing or malformed section ({type(exc).__name__}: {exc})") from None
    backbone = {n: _parse_atom(f"{where}: backbone.{n}", n, e, types, criteria) for n, e in bb_raw.items()}
    for req in ("N", "CA", "C", "O"):
        if req not in backbone:
            raise KnowledgeError(f"{where}: backbone needs atom {req}")
    residues, bases = {}, {}
    for rname, body in res_raw.items():
        if not isinstance(body, dict) or not isinstance(body.get("atoms"), dict):
            raise KnowledgeError(f"{where}: residue {rname} needs an 'atoms' mapping")
        residues[str(rname)] = MappingProxyType({n: _parse_atom(f"{where}: {rname}.{n}", n, e, types, criteria)
                                                 for n, e in body["atoms"].items()})
        bases[str(rname)] = str(body.get("base", rname))
    return ResidueTemplates(MappingProxyType(types), MappingProxyType(backbone), MappingProxyType(residues),
                            MappingProxyType(bases))


def load_templates(path: str | Path | None = None, criteria: HBondCriteria | None = None) -> ResidueTemplates:
    """Read and validate ``residue_templates.yaml`` (cross-checked against the criteria)."""
    if path is None and criteria is None:
        return _default_templates()
    crit = criteria or load_criteria()
    if path is None:
        return parse_templates(read_table(TEMPLATES_FILE), crit)
    p = Path(path)
    return parse_templates(read_table(p.name, p.parent), crit, p.name)


@lru_cache(maxsize=1)
def _default_templates() -> ResidueTemplates:
    return parse_templates(read_table(TEMPLATES_FILE), _default_criteria())
