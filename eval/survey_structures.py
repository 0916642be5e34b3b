"""Survey: load every shared structure with :func:`misi_agent.structure.load_complex` and report.

For the 308 PoseBusters entries (ligand by the manifest's CCD code) and the 41 PLIP entries
(ligand chosen automatically) it records whether a pocket and a ligand with CCD bond orders
come out, pocket and ligand sizes, the time per entry and every failure with its reason, and
checks the ligand:

* the RDKit molecule has one atom per ligand atom;
* its heavy-atom formula equals the CCD's (``chem_comp.formula``) minus the CCD atoms the
  entry does not resolve, and its formal charge the CCD's when the ligand is complete;
* every atom whose CCD neighbours are all resolved carries the CCD's number of hydrogens
  (checks bond orders and charges atom by atom);
* every bond has a length within 0.4 Å of the sum of covalent radii (a wrong template or
  swapped atom names would show up here);
* PoseBusters entries whose chosen copy has fewer heavy atoms than the CCD are flagged, with
  the missing atom names and whether the CCD marks them as leaving atoms.

For PLIP entries it lists the candidate ligands so the automatic choice can be judged.

Usage::

    python eval/survey_structures.py [--root ../shared/data/structures] [--out eval/results] [--limit N]

Writes ``structure_survey.json`` (every entry), ``structure_survey.md`` (summary tables) and
``structure_survey.png`` (distributions) into ``--out``, each via a temporary file.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import misi_agent  # noqa: F401  (before numpy: pins OpenBLAS's kernel, misi_agent.reproducibility)
import numpy as np
from rdkit import Chem
from tqdm import tqdm

import biotite.structure as struc
import biotite.structure.info as info

from misi_agent.structure import (
    Complex,
    StructureError,
    ccd_template,
    ligand_candidates,
    load_complex,
    polymer_amino_acids,
    read_atoms,
)

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = REPO.parent / "shared" / "data" / "structures"
TARGETS = {"posebusters": (300, 308), "plip": (38, 41)}
BOND_TOLERANCE = 0.4  # Å from the sum of covalent radii
# Only for commenting on the automatic PLIP choice (not used by load_complex): common
# cofactors and nucleotides that the largest-group rule prefers over a smaller drug or substrate.
COFACTORS = frozenset("NAD NAI NAP NDP NMN FAD FMN HEM HEC SAH SAM SFG ATP ADP AMP ANP ACP GTP GDP GCP GNP "
                      "PLP PMP COA ACO TPP H4B BH4 FES SF4".split())
PTABLE = Chem.GetPeriodicTable()


# ----------------------------------------------------------------------------- jobs


def survey_jobs(root: Path) -> list[dict]:
    """One job per entry: PoseBusters with the manifest's ligand code, then PLIP without one."""
    jobs = []
    with open(root / "posebusters" / "manifest.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            jobs.append({"pool": "posebusters", "pdb_id": row["pdb_id"], "file": root / "posebusters" / row["file"],
                         "code": row["ligand_ccd"]})
    for path in sorted((root / "plip").glob("*.pdb.gz")):
        jobs.append({"pool": "plip", "pdb_id": path.name[:4], "file": path, "code": None})
    return jobs


# ----------------------------------------------------------------------------- CCD facts


def _ccd_column(category: str, code: str, column: str) -> np.ndarray:
    return info.get_from_ccd(category, code, column).as_array()


def ccd_heavy_formula(code: str) -> Counter:
    """Heavy-atom element counts of ``chem_comp.formula`` (e.g. ``C34 H32 Fe N4 O4``)."""
    formula = str(_ccd_column("chem_comp", code, "formula")[0])
    out: Counter = Counter()
    for el, n in re.findall(r"([A-Za-z]+)(\d*)", formula):
        if el.upper() not in ("H", "D"):
            out[el.upper()] += int(n) if n else 1
    return out


def ccd_leaving_atoms(code: str) -> set[str]:
    names = _ccd_column("chem_comp_atom", code, "atom_id")
    flags = _ccd_column("chem_comp_atom", code, "pdbx_leaving_atom_flag")
    return {str(n) for n, f in zip(names, flags) if str(f).upper() == "Y"}


def mol_formula(mol: Chem.Mol) -> Counter:
    return Counter(a.GetSymbol().upper() for a in mol.GetAtoms() if a.GetAtomicNum() > 1)


def _fmt_formula(c: Counter) -> str:
    order = ["C", "N", "O"] + sorted(k for k in c if k not in ("C", "N", "O"))
    return " ".join(f"{k}{c[k]}" for k in order if c.get(k))


# ----------------------------------------------------------------------------- checks


def hydrogen_mismatches(mol: Chem.Mol, names: list[str], code: str) -> list[str]:
    """Atoms whose RDKit hydrogen count differs from the CCD's (bond orders or charges wrong).

    Only atoms whose heavy CCD neighbours are all resolved are compared: a missing neighbour
    is replaced by a hydrogen.
    """
    full = info.residue(code)
    fnames = [str(n) for n in full.atom_name]
    heavy = {n for n, e in zip(fnames, full.element) if e != "H"}
    nb: dict[str, list[str]] = {n: [] for n in fnames}
    for a, b, _ in full.bonds.as_array():
        nb[fnames[a]].append(fnames[b])
        nb[fnames[b]].append(fnames[a])
    present = set(names)
    out = []
    for atom, name in zip(mol.GetAtoms(), names):
        if name not in nb or not all(n in present for n in nb[name] if n in heavy):
            continue
        n_h = sum(1 for n in nb[name] if n not in heavy)
        if atom.GetTotalNumHs() != n_h:
            out.append(f"{name} {atom.GetTotalNumHs()}H vs CCD {n_h}H")
    return out


def ligand_checks(cx: Complex) -> dict:
    """Atom count, formula, charge and bond-length checks of the ligand against the CCD."""
    mol, lig, code = cx.ligand_mol, cx.ligand, cx.ligand_code
    out: dict = {"mol_atoms": mol.GetNumAtoms(), "mol_atoms_ok": mol.GetNumAtoms() == lig.array_length(),
                 "mol_charge": int(Chem.GetFormalCharge(mol)), "mol_formula": _fmt_formula(mol_formula(mol))}
    template = ccd_template(code)
    if template is not None:
        names = {str(n) for n in lig.atom_name}
        tnames = [str(n) for n in template.atom_name]
        missing = [n for n in tnames if n not in names]
        leaving = ccd_leaving_atoms(code)
        expected = ccd_heavy_formula(code)
        for n in missing:
            expected[str(template.element[tnames.index(n)]).upper()] -= 1
        expected = Counter({k: v for k, v in expected.items() if v > 0})
        ccd_charge = int(np.sum(template.charge)) if "charge" in template.get_annotation_categories() else 0
        out.update({
            "ccd_heavy_atoms": len(tnames),
            "missing_atoms": missing,
            "missing_leaving": [n for n in missing if n in leaving],
            "expected_formula": _fmt_formula(expected),
            "formula_ok": mol_formula(mol) == expected,
            "ccd_charge": ccd_charge,
            "charge_ok": bool(missing) or out["mol_charge"] == ccd_charge,
            "hydrogen_mismatch": hydrogen_mismatches(mol, [str(n) for n in lig.atom_name], code),
        })
    conf = mol.GetConformer().GetPositions()
    outliers = []
    for bond in mol.GetBonds():
        if bond.GetBondType() == Chem.BondType.DATIVE:
            continue
        a, b = bond.GetBeginAtom(), bond.GetEndAtom()
        d = float(np.linalg.norm(conf[a.GetIdx()] - conf[b.GetIdx()]))
        ref = PTABLE.GetRcovalent(a.GetAtomicNum()) + PTABLE.GetRcovalent(b.GetAtomicNum())
        if abs(d - ref) > BOND_TOLERANCE:
            outliers.append(f"{lig.atom_name[a.GetIdx()]}-{lig.atom_name[b.GetIdx()]} {d:.2f} Å")
    out["bond_outliers"] = outliers
    return out


def _group_label(atoms: struc.AtomArray, i: int, size: int | None = None) -> str:
    s = f"{atoms.res_name[i]} {atoms.chain_id[i]} {atoms.res_id[i]}{atoms.ins_code[i]}"
    return s if size is None else f"{s} ({size})"


def entry_context(atoms: struc.AtomArray, cx: Complex, pool: str) -> dict:
    """Copies of the chosen code, PLIP candidates and pocket annotations."""
    polymer = polymer_amino_acids(atoms)
    starts = struc.get_residue_starts(atoms, add_exclusive_stop=True)
    copies = [int(b - a) for a, b in zip(starts[:-1], starts[1:])
              if atoms.res_name[a] == cx.ligand_code and not polymer[a]]
    out: dict = {"copies": copies}
    if pool == "plip":
        groups: dict[str, list[int]] = {}
        for key, idx in ligand_candidates(atoms):
            groups.setdefault(key.name, []).append(len(idx))
        out["candidates"] = [f"{code} ({max(sizes)})" + (f" ×{len(sizes)}" if len(sizes) > 1 else "")
                             for code, sizes in groups.items()]
    p = cx.pocket
    pstarts = struc.get_residue_starts(p)
    out["pocket_ins_code_residues"] = [f"{p.chain_id[i]} {p.res_name[i]} {p.res_id[i]}{p.ins_code[i]}"
                                       for i in pstarts if p.ins_code[i]]
    out["pocket_hetero_residues"] = sorted({str(p.res_name[i]) for i in pstarts if p.hetero[i]})
    env = cx.environment
    out["environment"] = [_group_label(env, int(i)) for i in struc.get_residue_starts(env)] if env.array_length() else []
    return out


def survey_entry(job: dict) -> dict:
    rec = {"pool": job["pool"], "pdb_id": job["pdb_id"], "file": job["file"].name, "requested_code": job["code"]}
    t0 = time.perf_counter()
    try:
        cx = load_complex(job["file"], job["code"])
    except StructureError as exc:
        rec.update({"ok": False, "error": str(exc), "time_s": time.perf_counter() - t0})
        return rec
    rec["time_s"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    atoms = read_atoms(job["file"])
    rec["read_s"] = time.perf_counter() - t1
    key = cx.ligand_key
    rec.update({
        "ok": True,
        "ligand": {"code": cx.ligand_code, "chain": key.chain, "number": key.number, "ins_code": key.ins_code,
                   "atoms": cx.ligand.array_length(), "bond_orders": cx.bond_orders, "notes": list(cx.notes)},
        "pocket": {"residues": cx.n_pocket_residues, "atoms": cx.pocket.array_length()},
        "checks": ligand_checks(cx),
    })
    rec.update(entry_context(atoms, cx, job["pool"]))
    return rec


# ----------------------------------------------------------------------------- summary


def _dist(values: list[float]) -> dict:
    v = np.asarray(values, float)
    if v.size == 0:
        return {}
    q = np.percentile(v, [0, 5, 25, 50, 75, 95, 100])
    return {"n": int(v.size), "min": q[0], "p5": q[1], "p25": q[2], "median": q[3], "p75": q[4], "p95": q[5],
            "max": q[6], "mean": float(v.mean())}


def summarize(records: list[dict], ccd_load_s: float) -> dict:
    summary: dict = {"ccd_index_load_s": ccd_load_s, "pools": {}}
    for pool, (target, total) in TARGETS.items():
        recs = [r for r in records if r["pool"] == pool]
        ok = [r for r in recs if r["ok"]]
        ccd = [r for r in ok if r["ligand"]["bond_orders"] == "ccd"]
        summary["pools"][pool] = {
            "entries": len(recs), "loaded": len(ok), "ccd_bond_orders": len(ccd),
            "connectivity_only": len(ok) - len(ccd), "failed": len(recs) - len(ok),
            "target": f"{target} of {total}", "target_met": len(ccd) >= target,
            "pocket_residues": _dist([r["pocket"]["residues"] for r in ok]),
            "pocket_atoms": _dist([r["pocket"]["atoms"] for r in ok]),
            "ligand_atoms": _dist([r["ligand"]["atoms"] for r in ok]),
            "time_s": _dist([r["time_s"] for r in recs]),
            "read_s": _dist([r["read_s"] for r in ok]),
        }
    ok = [r for r in records if r["ok"]]
    summary["total_time_s"] = float(sum(r["time_s"] for r in records))
    summary["flags"] = {
        "mol_atom_count_mismatch": [r["pdb_id"] for r in ok if not r["checks"]["mol_atoms_ok"]],
        "formula_mismatch": [r["pdb_id"] for r in ok if r["checks"].get("formula_ok") is False],
        "charge_mismatch": [r["pdb_id"] for r in ok if r["checks"].get("charge_ok") is False],
        "hydrogen_mismatch": [r["pdb_id"] for r in ok if r["checks"].get("hydrogen_mismatch")],
        "bond_length_outliers": [r["pdb_id"] for r in ok if r["checks"]["bond_outliers"]],
        "posebusters_incomplete_copy": [r["pdb_id"] for r in ok if r["pool"] == "posebusters"
                                        and r["checks"].get("missing_atoms")],
        "pocket_insertion_codes": [r["pdb_id"] for r in ok if r["pocket_ins_code_residues"]],
    }
    summary["failures"] = [{"pdb_id": r["pdb_id"], "pool": r["pool"], "reason": r["error"]} for r in records if not r["ok"]]
    return summary


# ----------------------------------------------------------------------------- output


def _fmt_dist(d: dict, digits: int = 0) -> str:
    if not d:
        return "–"
    f = (lambda x: f"{x:.{digits}f}")
    return f"{f(d['min'])} / {f(d['p5'])} / {f(d['median'])} / {f(d['mean'])} / {f(d['p95'])} / {f(d['max'])}"


def markdown(summary: dict, records: list[dict]) -> str:
    lines = ["# Structure survey", "",
             "Every shared entry loaded with `misi_agent.structure.load_complex` by `eval/survey_structures.py`",
             "(PoseBusters: ligand by the manifest's CCD code; PLIP: ligand chosen automatically).", "",
             "## Outcome", "",
             "| pool | entries | loaded | CCD bond orders | connectivity only | failed | target | met |",
             "|---|---|---|---|---|---|---|---|"]
    for pool, s in summary["pools"].items():
        lines.append(f"| {pool} | {s['entries']} | {s['loaded']} | {s['ccd_bond_orders']} | {s['connectivity_only']} | "
                     f"{s['failed']} | {s['target']} | {'yes' if s['target_met'] else 'NO'} |")
    lines += ["", "## Sizes and times", "", "min / p5 / median / mean / p95 / max", "",
              "| pool | pocket residues | pocket atoms | ligand heavy atoms | load_complex s | read_atoms alone s |",
              "|---|---|---|---|---|---|"]
    for pool, s in summary["pools"].items():
        lines.append(f"| {pool} | {_fmt_dist(s['pocket_residues'])} | {_fmt_dist(s['pocket_atoms'])} | "
                     f"{_fmt_dist(s['ligand_atoms'])} | {_fmt_dist(s['time_s'], 3)} | {_fmt_dist(s['read_s'], 3)} |")
    lines += ["", f"Wall-clock times on a {os.cpu_count()}-core machine that other jobs may share; `read_atoms alone` "
              "is a second, separate read of the same file (parsing mmCIF/PDB with biotite, bonds included).",
              "", f"Total load time {summary['total_time_s']:.1f} s; the one-off load of biotite's CCD index "
              f"(first `ccd_template` call, not included above) took {summary['ccd_index_load_s']:.2f} s.", ""]
    lines += ["## Failures", ""]
    if summary["failures"]:
        lines += [f"- {f['pool']} {f['pdb_id']}: {f['reason']}" for f in summary["failures"]]
    else:
        lines.append("None.")
    flags = summary["flags"]
    by_id = {r["pdb_id"]: r for r in records}
    lines += ["", "## Ligand sanity", "",
              f"- RDKit atom count differs from the ligand's: {len(flags['mol_atom_count_mismatch'])} "
              f"{', '.join(flags['mol_atom_count_mismatch'])}",
              f"- heavy-atom formula differs from the CCD's minus unresolved atoms: {len(flags['formula_mismatch'])} "
              f"{', '.join(flags['formula_mismatch'])}",
              f"- formal charge differs from the CCD's (complete ligands): {len(flags['charge_mismatch'])} "
              f"{', '.join(flags['charge_mismatch'])}",
              f"- atoms whose RDKit hydrogen count differs from the CCD's (atoms with all CCD neighbours resolved): "
              f"{len(flags['hydrogen_mismatch'])} entries",
              *[f"  - {pid} {by_id[pid]['ligand']['code']}: {', '.join(by_id[pid]['checks']['hydrogen_mismatch'])}"
                for pid in flags["hydrogen_mismatch"]],
              f"- bonds more than {BOND_TOLERANCE} Å off the covalent-radius sum: {len(flags['bond_length_outliers'])} entries"]
    for pid in flags["bond_length_outliers"]:
        r = by_id[pid]
        lines.append(f"  - {pid} {r['ligand']['code']}: {', '.join(r['checks']['bond_outliers'])}")
    lines.append(f"- PoseBusters entries whose chosen copy has fewer heavy atoms than the CCD: "
                 f"{len(flags['posebusters_incomplete_copy'])}")
    for pid in flags["posebusters_incomplete_copy"]:
        r = by_id[pid]
        c = r["checks"]
        lines.append(f"  - {pid} {r['ligand']['code']}: {r['ligand']['atoms']} of {c['ccd_heavy_atoms']}; missing "
                     f"{', '.join(c['missing_atoms'])} (CCD leaving atoms: {', '.join(c['missing_leaving']) or 'none'}); "
                     f"copies in the entry: {r['copies']}")
    notes = [r for r in records if r["ok"] and r["ligand"]["notes"]]
    lines += ["", "## Notes from loading", ""]
    lines += [f"- {r['pool']} {r['pdb_id']} {r['ligand']['code']}: {'; '.join(r['ligand']['notes'])}" for r in notes] or ["None."]
    lines += ["", "## Pockets with insertion codes", ""]
    lines += [f"- {pid}: {', '.join(by_id[pid]['pocket_ins_code_residues'])}" for pid in flags["pocket_insertion_codes"]] or ["None."]
    lines += ["", "## PLIP: automatically chosen ligand", "",
              "Largest organic non-polymer group that is not water, an ion or an additive; ties keep file order.", "",
              "| entry | chosen | atoms | pocket residues | candidates (heavy atoms), largest first |", "|---|---|---|---|---|"]
    for r in records:
        if r["pool"] != "plip":
            continue
        if not r["ok"]:
            lines.append(f"| {r['pdb_id']} | failed | | | {r['error']} |")
            continue
        lg = r["ligand"]
        lines.append(f"| {r['pdb_id']} | {lg['code']} {lg['chain']} {lg['number']}{lg['ins_code']} | {lg['atoms']} | "
                     f"{r['pocket']['residues']} | {'; '.join(r['candidates'])} |")
    cof = [r for r in records if r["pool"] == "plip" and r["ok"] and r["ligand"]["code"] in COFACTORS
           and len(r["candidates"]) > 1]
    lines += ["", f"The rule takes a cofactor or nucleotide although another organic group is present in "
              f"{len(cof)} entries: " + ", ".join(f"{r['pdb_id']} ({r['ligand']['code']}; also "
                                                 f"{', '.join(c.split(' ')[0] for c in r['candidates'][1:])})"
                                                 for r in cof) + ". "
              "In PDBbind-style benchmarks the ligand of interest there would usually be the smaller drug or "
              "substrate; the issue fixes the largest-group rule, so it is kept and reported here."]
    multi = Counter(len(r["copies"]) > 1 for r in records if r["ok"] and r["pool"] == "posebusters")
    lines += ["", "## Other facts", "",
              f"- PoseBusters entries with several copies of the ligand code: {multi[True]} (the most complete copy "
              "is taken; ties keep file order).",
              f"- Entries with modified (HETATM) protein residues in the pocket: "
              f"{sum(1 for r in records if r['ok'] and r['pocket_hetero_residues'])}.",
              f"- Entries with non-water hetero groups (metals, cofactors, additives, free amino acids) within 10 Å of the "
              f"ligand, kept as environment: "
              f"{sum(1 for r in records if r['ok'] and r['environment'])}.", ""]
    return "\n".join(lines)


def plot(summary: dict, records: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for pool, color in (("posebusters", "tab:blue"), ("plip", "tab:orange")):
        ok = [r for r in records if r["ok"] and r["pool"] == pool]
        axes[0].hist([r["pocket"]["residues"] for r in ok], bins=25, alpha=0.6, color=color, label=pool)
        axes[1].hist([r["ligand"]["atoms"] for r in ok], bins=25, alpha=0.6, color=color, label=pool)
        axes[2].hist([r["time_s"] for r in records if r["pool"] == pool], bins=25, alpha=0.6, color=color, label=pool)
    for ax, title in zip(axes, ("pocket residues (10 Å)", "ligand heavy atoms", "load_complex time (s)")):
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _atomic_write(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        return round(float(obj), 4)
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="folder with posebusters/ and plip/")
    ap.add_argument("--out", type=Path, default=REPO / "eval" / "results", help="output folder")
    ap.add_argument("--limit", type=int, default=None, help="survey only the first N entries of each pool")
    args = ap.parse_args(argv)
    if not (args.root / "posebusters" / "manifest.csv").is_file():
        print(f"error: {args.root} has no posebusters/manifest.csv", file=sys.stderr)
        return 2
    jobs = survey_jobs(args.root)
    if args.limit:
        jobs = [j for pool in TARGETS for j in [x for x in jobs if x["pool"] == pool][: args.limit]]
    t = time.perf_counter()
    ccd_template("ATP")  # loads biotite's CCD index once; timed apart from the entries
    ccd_load_s = time.perf_counter() - t
    records = [survey_entry(j) for j in tqdm(jobs, desc="structures", unit="entry")]
    summary = summarize(records, ccd_load_s)
    args.out.mkdir(parents=True, exist_ok=True)
    payload = _jsonable({"summary": summary, "entries": records})
    _atomic_write(args.out / "structure_survey.json", lambda p: p.write_text(json.dumps(payload, indent=1) + "\n"))
    _atomic_write(args.out / "structure_survey.md", lambda p: p.write_text(markdown(payload["summary"], payload["entries"])))
    _atomic_write(args.out / "structure_survey.png", lambda p: plot(summary, records, p))
    for pool, s in summary["pools"].items():
        print(f"{pool}: {s['loaded']}/{s['entries']} loaded, {s['ccd_bond_orders']} with CCD bond orders "
              f"(target {s['target']}: {'met' if s['target_met'] else 'NOT met'}), median {s['time_s']['median']:.3f} s/entry")
    for f in summary["failures"]:
        print(f"failed {f['pool']} {f['pdb_id']}: {f['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
