"""The H-bond knowledge tables: values, tolerance rule, templates and validation."""
from __future__ import annotations

import copy

import biotite.structure.info as info
import pytest
import yaml

from misi_agent.knowledge import KNOWLEDGE_DIR, KnowledgeError
from misi_agent.knowledge.hbonds import (load_criteria, load_templates, parse_criteria, parse_templates,
                                         relax_value)

STANDARD = ["ALA", "ARG", "ASN", "ASP", "CYS", "GLN", "GLU", "GLY", "HIS", "ILE",
            "LEU", "LYS", "MET", "PHE", "PRO", "SER", "THR", "TRP", "TYR", "VAL"]


@pytest.fixture(scope="module")
def relaxed():
    return load_criteria().resolved("relaxed")


def test_tolerance_rule():
    assert relax_value("distance", 3.17, 0.4, 20) == pytest.approx(3.57)
    assert relax_value("h_distance", 2.23, 0.4, 20) == pytest.approx(2.63)
    assert relax_value("phi_min", 110, 0.4, 20) == 90
    assert relax_value("theta_min", 10, 0.4, 20) == 0          # not below 0
    assert relax_value("upsilon_max", 161, 0.4, 20) == 180     # not above 180
    assert relax_value("tau_max", 30, 0.4, 20) == 50


def test_strict_mode_is_the_table(relaxed):
    crit = load_criteria()
    strict = crit.resolved("strict")
    assert dict(strict.acceptors["carboxylate"].params["syn"]) == dict(crit.acceptors["carboxylate"].params["syn"])
    assert relaxed.acceptors["carboxylate"].params["syn"]["distance"] == pytest.approx(3.57)
    with pytest.raises(KnowledgeError):
        crit.resolved("lenient")


# Relaxed values published in ChimeraX's criteria tables (hbond-criteria.md): the strict
# YAML values plus the tolerance must reproduce them.
ACCEPTOR_RELAXED = {
    ("carboxylate", "syn"): {"distance": 3.57, "phi_min": 70, "theta_min": 125},
    ("carboxylate", "anti"): {"distance": 3.57, "phi_min": 90, "theta_min": 125},
    ("amide_o", "syn"): {"distance": 3.70, "phi_min": 90, "theta_min": 115},
    ("amide_o", "anti"): {"distance": 3.70, "phi_min": 90, "theta_min": 110},
    ("ketone_o", "params"): {"distance": 3.70, "phi_min": 90, "theta_min": 110},
    ("ester_o", "params"): {"distance": 3.57, "phi_min": 90, "theta_min": 115},
    ("hydroxyl", "params"): {"distance": 3.43, "upsilon_min": 80, "upsilon_max": 180, "theta_min": 125},
    ("phenol", "params"): {"distance": 3.57, "upsilon_min": 80, "upsilon_max": 173, "theta_min": 130},
    ("nitrile_n", "params"): {"distance": 3.70, "upsilon_min": 133, "upsilon_max": 180},
    ("ring5_asym_n", "params"): {"distance": 3.70, "phi_min": 130, "theta_min": 115},
    ("ring6_sym_n", "params"): {"distance": 3.57, "phi_min": 130, "theta_min": 125},
    ("ether_o", "params"): {"distance": 3.82, "phi_min": 120, "theta_min": 120},
}
DONOR_RELAXED = {
    "hydroxyl": {"distance": 3.57, "upsilon_min": 70, "upsilon_max": 161, "theta_min": 110},
    "ammonium": {"distance": 3.57, "upsilon_min": 70, "upsilon_max": 156},
    "guanidinium": {"distance": 3.57, "upsilon_min": 70, "upsilon_max": 166},
    "amide_nh2": {"distance": 3.70, "upsilon_min": 83, "upsilon_max": 173},
    "amide_nh": {"h_distance": 2.63, "theta_min": 126},
    "ring5_nh": {"h_distance": 2.49, "theta_min": 126},
}


@pytest.mark.parametrize("key", sorted(ACCEPTOR_RELAXED))
def test_acceptor_relaxed_values_match_published_table(relaxed, key):
    gid, part = key
    params = relaxed.acceptors[gid].params[part]
    for k, v in ACCEPTOR_RELAXED[key].items():
        assert params[k] == pytest.approx(v), (gid, part, k)


@pytest.mark.parametrize("gid", sorted(DONOR_RELAXED))
def test_donor_relaxed_values_match_published_table(relaxed, gid):
    params = relaxed.donors[gid].classes["sp2_O"]
    for k, v in DONOR_RELAXED[gid].items():
        assert params[k] == pytest.approx(v), (gid, k)


def test_fallback_rows_hold_chimerax_strict_values():
    crit = load_criteria()
    assert dict(crit.acceptors["generic_o"].params["params"]) == {"distance": 3.53, "angle_min": 90}
    assert crit.donors["generic_o"].classes["sp3_O"]["h_distance"] == pytest.approx(2.28)
    assert crit.donors["generic_s"].classes["sp2_O"]["distance"] == pytest.approx(3.65)


def test_every_row_has_a_source():
    crit = load_criteria()
    for g in list(crit.acceptors.values()) + list(crit.donors.values()):
        assert g.source.strip() and ("MD96" in g.source or "CXDOC" in g.source), g.id


def test_templates_cover_every_heavy_atom_of_the_standard_residues():
    """Every heavy atom of the twenty amino acids (the list the label reader, identity and protonation use) has
    a template."""
    from misi_agent.knowledge import STANDARD_RESIDUES

    assert sorted(STANDARD_RESIDUES) == STANDARD
    t = load_templates()
    for res in STANDARD_RESIDUES:
        ccd = info.residue(res)
        heavy = {str(n) for n, e in zip(ccd.atom_name, ccd.element) if e != "H"}
        for name in heavy:
            assert t.atom(res, name) is not None, f"{res} {name} has no template"


def test_template_roles_follow_chimerax():
    t = load_templates()
    assert (t.atom("CYS", "SG").role, t.atom("MET", "SD").role, t.atom("TRP", "NE1").role) == ("donor", "none", "donor")
    assert t.atom("PRO", "N").role == "none" and t.atom("ALA", "N").donor == "amide_nh"
    assert t.atom("HIS", "ND1").role == t.atom("HIS", "NE2").role == "both"
    assert t.atom("HIS", "ND1").acceptor == "ring5_asym_n" and t.atom("HIS", "ND1").donor == "ring5_nh"
    assert t.atom("LYS", "NZ").donor == "ammonium" and t.atom("LYS", "NZ").type == "N3+"
    assert {t.atom("ARG", a).donor for a in ("NH1", "NH2")} == {"guanidinium"}
    assert t.atom("ASN", "OD1").acceptor == t.atom("GLN", "OE1").acceptor == t.atom("ALA", "O").acceptor == "amide_o"
    assert t.atom("ASN", "ND2").donor == t.atom("GLN", "NE2").donor == "amide_nh2"
    assert t.atom("ASP", "OD1").acceptor == t.atom("GLU", "OE2").acceptor == t.atom("ALA", "OXT").acceptor == "carboxylate"
    assert t.atom("ASP", "OD1").role == "acceptor"           # no donation without hydrogens
    assert t.atom("SER", "OG").donor == t.atom("THR", "OG1").donor == "hydroxyl"
    assert t.atom("TYR", "OH").donor == t.atom("TYR", "OH").acceptor == "phenol"


# ----------------------------------------------------------------------------- validation


def _tables():
    crit = yaml.safe_load((KNOWLEDGE_DIR / "hbond_criteria.yaml").read_text())
    tmpl = yaml.safe_load((KNOWLEDGE_DIR / "residue_templates.yaml").read_text())
    return crit, tmpl


def _parse(table, tmp_path):
    return parse_criteria(table, tmp_path / "hbond_criteria.yaml")


def _row(table, section, gid):
    return next(r for r in table[section] if r["id"] == gid)


@pytest.mark.parametrize("edit, message", [
    (lambda t: _row(t, "acceptors", "ketone_o")["params"].pop("phi_min"), "missing phi_min"),
    (lambda t: _row(t, "acceptors", "ketone_o")["params"].update(distance=12.0), "outside"),
    (lambda t: _row(t, "acceptors", "ketone_o")["params"].update(phi_min=200), "outside"),
    (lambda t: _row(t, "acceptors", "hydroxyl")["params"].update(upsilon_min=170), "upsilon_min is larger"),
    (lambda t: _row(t, "acceptors", "ketone_o").update(test="bogus"), "test must be"),
    (lambda t: _row(t, "acceptors", "ketone_o").update(source=""), "non-empty"),
    (lambda t: _row(t, "donors", "ammonium").pop("tau_symmetry"), "tau_symmetry"),
    (lambda t: _row(t, "donors", "ammonium").pop("sp3_N"), "sp3_N"),
    (lambda t: _row(t, "donors", "ammonium")["sp2_O"].update(colour=3), "unknown key"),
    (lambda t: t["acceptors"].append(copy.deepcopy(_row(t, "acceptors", "ketone_o"))), "duplicate"),
    (lambda t: t["tolerance"]["modes"].pop("strict"), "strict"),
    (lambda t: t.pop("metal"), "missing or malformed"),
])
def test_bad_criteria_raise_one_line_errors(tmp_path, edit, message):
    crit, _ = _tables()
    edit(crit)
    with pytest.raises(KnowledgeError) as exc:
        _parse(crit, tmp_path)
    assert message in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t["residues"]["SER"]["atoms"]["OG"].update(donor="no_such_group"), "not in hbond_criteria.yaml"),
    (lambda t: t["residues"]["SER"]["atoms"]["OG"].update(role="acceptor"), "disagree"),
    (lambda t: t["residues"]["SER"]["atoms"]["OG"].update(type="Q9"), "unknown atom type"),
    (lambda t: t["backbone"].pop("CA"), "backbone needs atom CA"),
    (lambda t: t["residues"]["ALA"].pop("atoms"), "atoms"),
])
def test_bad_templates_raise(tmp_path, edit, message):
    crit_t, tmpl = _tables()
    crit = _parse(crit_t, tmp_path)
    edit(tmpl)
    with pytest.raises(KnowledgeError) as exc:
        parse_templates(tmpl, crit)
    assert message in str(exc.value)


def test_templates_are_checked_against_the_criteria_they_load_with(tmp_path):
    crit_t, tmpl = _tables()
    crit_t["donors"] = [r for r in crit_t["donors"] if r["id"] != "ammonium"]
    crit = _parse(crit_t, tmp_path)
    with pytest.raises(KnowledgeError, match="ammonium"):
        parse_templates(tmpl, crit)


def test_edited_copy_is_read_from_its_path(tmp_path):
    crit_t, _ = _tables()
    _row(crit_t, "acceptors", "ketone_o")["params"]["distance"] = 2.9
    path = tmp_path / "edited.yaml"
    path.write_text(yaml.safe_dump(crit_t))
    crit = load_criteria(path)
    assert crit.resolved("relaxed").acceptors["ketone_o"].params["params"]["distance"] == pytest.approx(3.3)
    assert load_criteria().acceptors["ketone_o"].params["params"]["distance"] == pytest.approx(3.30)
