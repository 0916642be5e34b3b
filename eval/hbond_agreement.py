"""Agreement of the two H-bond engines: ChimeraX-compatible (ours) vs PLIP 3.0.1.

For every shared complex (308 PoseBusters entries with the manifest's ligand code, 41
PLIP entries with the automatic ligand choice) this runs
:func:`misi_agent.tools.hbonds.find_hbonds` (relaxed, ChimeraX's defaults: the benchmark's
ground truth) and :func:`misi_agent.tools.plip_tool.plip_interactions` (one PLIP worker
process for the whole set) and compares the H-bonds as direction-free pairs
(protein atom, ligand atom):

* bonds per engine, shared pairs, Jaccard index per complex and over all pairs;
* for every pair found by one engine only, the reason, read off the other engine's own
  intermediate results:
  - ChimeraX only: sulfur (PLIP has no sulfur H-bonds); PLIP dropped the bond inside a
    salt bridge, or kept only one H-bond per donor (both visible in PLIP's unrefined
    H-bonds); Open Babel put no H on the donor or does not type the acceptor; Open
    Babel's hydrogen gives D–H···A ≤ 100° (split by whether ChimeraX tested θ at all: a
    rotatable H has no position without explicit hydrogens);
  - PLIP only: ChimeraX does not type the donor or acceptor (protonation states, e.g.
    Open Babel protonates phosphates and carboxylates), D···A or H···A beyond ChimeraX's
    group limit (PLIP allows D···A < 4.1 Å), a θ/τ donor without a placed hydrogen, an
    angle test, or the metal rule;
  with counts by reason, by criteria group and by element pair;
* PLIP's run-to-run stability: PLIP again on a subset in fresh worker processes, once
  with the same hash seed and once with another, counting complexes whose H-bond sets
  differ.

Usage::

    python eval/hbond_agreement.py [--root /work/shared/data/structures] [--out eval/results]
                                   [--limit N] [--stability-every 3]

Writes ``hbond_agreement.json`` (every complex), ``hbond_agreement.md`` (tables and a
summary in words) and ``hbond_agreement.png`` into ``--out``, each via a temporary file.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import misi_agent  # noqa: F401  (before numpy: pins OpenBLAS's kernel, misi_agent.reproducibility)
import numpy as np
from tqdm import tqdm

from misi_agent.errors import MisiError
from misi_agent.structure import Complex, load_complex
from misi_agent.tools import hbonds as H
from misi_agent.tools.plip_tool import PlipInteractions, PlipWorker, plip_interactions

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = Path("/work/shared/data/structures")
PLIP_MAX_DISTANCE = 4.1
PLIP_MIN_ANGLE = 100.0

Pair = tuple[str, int, str, str, str, str]  # chain, number, ins code, residue, protein atom, ligand atom


# ----------------------------------------------------------------------------- inputs


def entries(root: Path) -> list[tuple[str, Path, str | None]]:
    """(set, file, ligand CCD or None) for PoseBusters (manifest codes) then the PLIP pool."""
    out = []
    pb = root / "posebusters"
    with (pb / "manifest.csv").open() as fh:
        for row in sorted(csv.DictReader(fh), key=lambda r: r["pdb_id"]):
            out.append(("posebusters", pb / row["file"], row["ligand_ccd"] or None))
    for f in sorted((root / "plip").glob("*.pdb.gz")):
        out.append(("plip", f, None))
    return out


def pair_of(b) -> Pair:
    return (b.chain, int(b.residue_number), b.insertion_code, b.residue_name, b.protein_atom, b.ligand_atom)


def pair_label(p: Pair) -> str:
    chain, num, ins, res, pa, la = p
    return f"{res} {num}{ins} {pa} {chain}, {la}"


# ----------------------------------------------------------------------------- reasons


def element(cx: Complex, side: str, idx: int) -> str:
    arr = cx.pocket if side == "protein" else cx.ligand
    return str(arr.element[idx]).upper() if idx >= 0 else "?"


def element_pair(cx: Complex, donor: str, p_idx: int, l_idx: int) -> str:
    """``N(protein)→O(ligand)``: donor element and side, then acceptor."""
    pe, le = element(cx, "protein", p_idx), element(cx, "ligand", l_idx)
    return f"{pe}(protein)→{le}(ligand)" if donor == "protein" else f"{le}(ligand)→{pe}(protein)"


def _angle(a, b, c) -> float:
    v1, v2 = np.asarray(a) - np.asarray(b), np.asarray(c) - np.asarray(b)
    cos = float(np.dot(v1, v2) / (np.linalg.norm(v1) * np.linalg.norm(v2)))
    return float(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))))


def chimerax_only_reason(cx: Complex, hb, plip: PlipInteractions) -> str:
    """Why PLIP does not report a bond the ChimeraX-compatible engine finds."""
    c = plip.candidates
    p_el, l_el = element(cx, "protein", hb.protein_index), element(cx, "ligand", hb.ligand_index)
    if "S" in (p_el, l_el):
        return "sulfur (PLIP: no sulfur H-bonds)"
    don = ("protein", hb.protein_index) if hb.donor == "protein" else ("ligand", hb.ligand_index)
    acc = ("ligand", hb.ligand_index) if hb.donor == "protein" else ("protein", hb.protein_index)
    raw = [r for r in c.raw_hbonds if r[0] == hb.donor and r[1] == hb.protein_index and r[2] == hb.ligand_index]
    if raw:
        for sb in plip.salt_bridges:
            if (sb.chain, sb.residue_number, sb.insertion_code) == (hb.chain, hb.residue_number, hb.insertion_code) \
                    and hb.protein_atom in sb.protein_atoms and hb.ligand_atom in sb.ligand_atoms:
                return "PLIP: dropped inside a salt bridge"
        return "PLIP: one H-bond per donor (another acceptor kept)"
    if don not in c.donors:
        return "PLIP: donor has no Open Babel hydrogen / not a donor"
    if acc not in c.acceptors:
        return "PLIP: acceptor not typed by Open Babel"
    d_xyz = cx.pocket.coord[hb.protein_index] if hb.donor == "protein" else cx.ligand.coord[hb.ligand_index]
    a_xyz = cx.ligand.coord[hb.ligand_index] if hb.donor == "protein" else cx.pocket.coord[hb.protein_index]
    best = max((_angle(d_xyz, h, a_xyz) for h in c.donors[don]), default=0.0)
    if best <= PLIP_MIN_ANGLE:
        if hb.h_distance is None:
            return "PLIP: D–H···A ≤ 100° with Open Babel's H (rotatable H: ChimeraX did not test θ)"
        return "PLIP: D–H···A ≤ 100° with Open Babel's H (ChimeraX's H passed)"
    if hb.distance >= PLIP_MAX_DISTANCE:
        return "PLIP: D···A ≥ 4.1 Å"
    return "PLIP: other (binding-site selection)"


class EngineProbe:
    """Re-runs the ChimeraX-compatible engine's two half-tests on a pair PLIP reports.

    Uses the engine's own typing and criteria (``type_complex``, ``_Engine``), so the reason
    is the engine's, not a re-implementation.
    """

    def __init__(self, cx: Complex):
        self.cx = cx
        self.R = H._resolve_criteria(None, "relaxed")
        self.pocket, self.ligand = H.type_complex(cx)
        self.eng = H._Engine(self.pocket, self.ligand, self.R, H.environment_metals(cx))

    def groups(self, donor: str, p_idx: int, l_idx: int) -> str:
        don, di, acc, ai = self._sides(donor, p_idx, l_idx)
        dg = don.donors[di].group if di in don.donors else "-"
        ag = acc.acceptors[ai].group if ai in acc.acceptors else "-"
        return f"{dg}/{ag}"

    def _sides(self, donor: str, p_idx: int, l_idx: int):
        if donor == "protein":
            return self.pocket, p_idx, self.ligand, l_idx
        return self.ligand, l_idx, self.pocket, p_idx

    def reason(self, donor: str, p_idx: int, l_idx: int) -> str:
        """Why the ChimeraX-compatible engine rejects PLIP's bond (donor side as PLIP says)."""
        if p_idx < 0:
            return "ChimeraX: protein atom outside the pocket"
        don, di, acc, ai = self._sides(donor, p_idx, l_idx)
        if di not in don.donors:
            return f"ChimeraX: {donor} atom not a donor (typing/protonation)"
        if ai not in acc.acceptors:
            other = "ligand" if donor == "protein" else "protein"
            return f"ChimeraX: {other} atom not an acceptor (typing)"
        d, a = don.xyz[di], acc.xyz[ai]
        dist = float(np.linalg.norm(np.asarray(d) - np.asarray(a)))
        hyds = self.eng.hydrogens(don, di)
        ac = self.eng.acceptor_check(acc, ai, don, di, hyds)
        if not ac.ok:
            g = self.R.acceptors[acc.acceptors[ai].group]
            limits = [p["distance"] for p in g.params.values() if isinstance(p, Mapping) and "distance" in p]
            extra = self.R.sulfur_distance if don.elements[di] == "S" else 0.0
            if limits and dist > max(limits) + extra:
                return "ChimeraX: D···A beyond the acceptor group's limit"
            return "ChimeraX: acceptor angle test fails"
        dc = self.eng.donor_check(don, di, acc, ai, hyds)
        if not dc.ok:
            g = self.R.donors[don.donors[di].group]
            if g.test == "theta_tau" and not hyds:
                return "ChimeraX: θ/τ donor without a placed hydrogen"
            cls = H.acceptor_class(acc.elements[ai], acc.types[ai], self.eng.types)
            p = g.classes.get(cls, {}) if cls else {}
            if "distance" in p and dist > p["distance"]:
                return "ChimeraX: D···A beyond the donor group's limit"
            if "h_distance" in p and dc.h_distance is not None and dc.h_distance > p["h_distance"]:
                return "ChimeraX: H···A beyond the donor group's limit"
            return "ChimeraX: donor angle test fails"
        if self.eng.test(don, di, acc, ai) is None:
            return "ChimeraX: metal rule (acceptor coordinates a metal)"
        return "ChimeraX: other"


# ----------------------------------------------------------------------------- one complex


def compare(cx: Complex, chx: list, plip: PlipInteractions) -> dict:
    """Per-complex comparison record (JSON-ready)."""
    a = {pair_of(b) for b in chx}
    p = {pair_of(b) for b in plip.hbonds}
    both, union = a & p, a | p
    rec = {
        "chimerax": len(a), "plip": len(p), "shared": len(both),
        "jaccard": (len(both) / len(union)) if union else 1.0,
        "chimerax_only": [], "plip_only": [],
        "plip_counts": plip.counts(),
    }
    seen = set()
    for hb in sorted(chx, key=lambda b: (b.donor != "protein", b.protein_index, b.ligand_index)):
        key = pair_of(hb)
        if key in p or key in seen:
            continue
        seen.add(key)
        rec["chimerax_only"].append({
            "pair": pair_label(key), "donor": hb.donor, "group": hb.group,
            "elements": element_pair(cx, hb.donor, hb.protein_index, hb.ligand_index),
            "distance": round(hb.distance, 2), "reason": chimerax_only_reason(cx, hb, plip)})
    probe = None
    seen = set()
    for hb in plip.hbonds:
        key = pair_of(hb)
        if key in a or key in seen:
            continue
        seen.add(key)
        probe = probe or EngineProbe(cx)
        try:
            reason = probe.reason(hb.donor, hb.protein_index, hb.ligand_index)
            group = probe.groups(hb.donor, hb.protein_index, hb.ligand_index)
        except Exception as exc:  # the probe uses engine internals; never let it stop the survey
            reason, group = f"unexplained ({type(exc).__name__})", "?"
        rec["plip_only"].append({
            "pair": pair_label(key), "donor": hb.donor, "group": group,
            "elements": element_pair(cx, hb.donor, hb.protein_index, hb.ligand_index),
            "distance": round(hb.distance, 2), "angle": hb.angle, "reason": reason})
    return rec


def hbond_set(plip: PlipInteractions) -> list[tuple]:
    return sorted((pair_of(b), b.donor) for b in plip.hbonds)


# ----------------------------------------------------------------------------- survey


def run(root: Path, limit: int | None, stability_every: int) -> dict:
    items = entries(root)
    if limit:
        items = items[:limit]
    records: list[dict] = []
    with PlipWorker() as worker:
        for dataset, path, code in tqdm(items, desc="complexes", unit="cx"):
            rec = {"set": dataset, "file": path.name, "ligand": code}
            try:
                cx = load_complex(path, code)
                rec["ligand"] = cx.ligand_code
                rec["ligand_key"] = f"{cx.ligand_key.chain}:{cx.ligand_key.number}{cx.ligand_key.ins_code}"
                t0 = time.perf_counter()
                chx = H.find_hbonds(cx, "relaxed")
                rec["chimerax_seconds"] = round(time.perf_counter() - t0, 4)
                t0 = time.perf_counter()
                plip = plip_interactions(cx, worker=worker, details=True)
                rec["plip_seconds"] = round(time.perf_counter() - t0, 4)
                rec.update(compare(cx, chx, plip))
                rec["plip_hbonds"] = [[pair_label(k), d] for k, d in hbond_set(plip)]
            except MisiError as exc:
                rec["error"] = str(exc)
            records.append(rec)
    stability = plip_stability(items, records, stability_every)
    return {"records": records, "stability": stability}


def plip_stability(items, records, every: int) -> dict:
    """PLIP again on every ``every``-th complex: fresh worker, same hash seed / another seed."""
    subset = [(it, rec) for k, (it, rec) in enumerate(zip(items, records)) if k % every == 0 and "error" not in rec]
    out = {"every": every, "n": len(subset)}
    for label, seed in (("same_seed", 0), ("other_seed", 12345)):
        differing = []
        with PlipWorker(hash_seed=seed) as worker:
            for (dataset, path, code), rec in tqdm(subset, desc=f"PLIP rerun ({label})", unit="cx"):
                try:
                    cx = load_complex(path, code)
                    again = [[pair_label(k), d] for k, d in hbond_set(plip_interactions(cx, worker=worker))]
                except MisiError as exc:
                    again = [["error", str(exc)]]
                if again != rec["plip_hbonds"]:
                    first = {tuple(x) for x in rec["plip_hbonds"]}
                    second = {tuple(x) for x in again}
                    differing.append({"file": rec["file"], "first": len(first), "second": len(second),
                                      "only_first": sorted(" ".join(x) for x in first - second),
                                      "only_second": sorted(" ".join(x) for x in second - first)})
        out[label] = {"differing": len(differing), "complexes": differing}
    return out


# ----------------------------------------------------------------------------- summary


def summarize(result: dict) -> dict:
    recs = [r for r in result["records"] if "error" not in r]
    errors = [r for r in result["records"] if "error" in r]
    tot = {k: sum(r[k] for r in recs) for k in ("chimerax", "plip", "shared")}
    union = tot["chimerax"] + tot["plip"] - tot["shared"]
    jac = [r["jaccard"] for r in recs]
    reasons_c = Counter(x["reason"] for r in recs for x in r["chimerax_only"])
    reasons_p = Counter(x["reason"] for r in recs for x in r["plip_only"])
    groups_c = Counter(x["group"] for r in recs for x in r["chimerax_only"])
    groups_p = Counter(x["group"] for r in recs for x in r["plip_only"])
    elems_c = Counter(x["elements"] for r in recs for x in r["chimerax_only"])
    elems_p = Counter(x["elements"] for r in recs for x in r["plip_only"])
    by_set = {}
    for s in ("posebusters", "plip"):
        rs = [r for r in recs if r["set"] == s]
        if rs:
            t = {k: sum(r[k] for r in rs) for k in ("chimerax", "plip", "shared")}
            u = t["chimerax"] + t["plip"] - t["shared"]
            by_set[s] = {"complexes": len(rs), **t, "pooled_jaccard": t["shared"] / u if u else 1.0,
                         "mean_jaccard": statistics.fmean(r["jaccard"] for r in rs)}
    plip_types = Counter()
    for r in recs:
        plip_types.update(r["plip_counts"])
    return {
        "complexes": len(result["records"]), "compared": len(recs), "errors": len(errors),
        "error_list": [{"file": r["file"], "error": r["error"]} for r in errors],
        **tot, "pooled_jaccard": tot["shared"] / union if union else 1.0,
        "mean_jaccard": statistics.fmean(jac) if jac else float("nan"),
        "median_jaccard": statistics.median(jac) if jac else float("nan"),
        "identical_sets": sum(1 for r in recs if r["chimerax"] == r["plip"] == r["shared"]),
        "both_empty": sum(1 for r in recs if r["chimerax"] == r["plip"] == 0),
        "by_set": by_set,
        "chimerax_only_reasons": reasons_c.most_common(), "plip_only_reasons": reasons_p.most_common(),
        "chimerax_only_groups": groups_c.most_common(12), "plip_only_groups": groups_p.most_common(12),
        "chimerax_only_elements": elems_c.most_common(10), "plip_only_elements": elems_p.most_common(10),
        "plip_interaction_types": dict(plip_types),
        "median_seconds": {
            "chimerax": statistics.median(r["chimerax_seconds"] for r in recs) if recs else None,
            "plip": statistics.median(r["plip_seconds"] for r in recs) if recs else None},
        "stability": {k: (v if not isinstance(v, dict) else {"differing": v["differing"]})
                      for k, v in result["stability"].items()},
    }


def _table(rows: list[tuple], header: tuple[str, ...]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def markdown(summary: dict, result: dict) -> str:
    s = summary
    cx_only = s["chimerax"] - s["shared"]
    pl_only = s["plip"] - s["shared"]
    lines = [
        "# H-bond agreement: ChimeraX-compatible engine vs PLIP 3.0.1",
        "",
        "Produced by `python eval/hbond_agreement.py` over the shared structures (PoseBusters with the manifest's",
        "ligand codes, the PLIP pool with the automatic ligand choice). ChimeraX-compatible engine: relaxed",
        "criteria (ChimeraX `hbonds` defaults, the MiSI-Bench ground truth), hydrogens only where heavy atoms",
        "fix them. PLIP: the entry's whole first model, Open Babel's polar hydrogens, run in a worker process.",
        "Pairs are compared direction-free as (protein atom, ligand atom).",
        "",
        "## Totals",
        "",
    ]
    lines += _table([
        ("complexes", s["complexes"]), ("compared", s["compared"]), ("failed (either engine)", s["errors"]),
        ("H-bonds, ChimeraX-compatible", s["chimerax"]), ("H-bonds, PLIP", s["plip"]),
        ("shared pairs", s["shared"]), ("ChimeraX only", cx_only), ("PLIP only", pl_only),
        ("pooled Jaccard (shared / union)", f"{s['pooled_jaccard']:.3f}"),
        ("mean per-complex Jaccard", f"{s['mean_jaccard']:.3f}"),
        ("median per-complex Jaccard", f"{s['median_jaccard']:.3f}"),
        ("complexes with identical sets (of them: no H-bond in either)", f"{s['identical_sets']} ({s['both_empty']})"),
        ("median time per complex, ChimeraX-compatible (s)", f"{s['median_seconds']['chimerax']:.3f}"),
        ("median time per complex, PLIP incl. I/O (s)", f"{s['median_seconds']['plip']:.3f}"),
    ], ("quantity", "value"))
    lines += ["", "By set:", ""]
    lines += _table([(k, v["complexes"], v["chimerax"], v["plip"], v["shared"], f"{v['pooled_jaccard']:.3f}",
                      f"{v['mean_jaccard']:.3f}") for k, v in s["by_set"].items()],
                    ("set", "complexes", "ChimeraX", "PLIP", "shared", "pooled Jaccard", "mean Jaccard"))
    lines += ["", "## Why pairs differ", "", f"Found by the ChimeraX-compatible engine only ({cx_only} pairs):", ""]
    lines += _table([(r, n, f"{100 * n / max(cx_only, 1):.0f}%") for r, n in s["chimerax_only_reasons"]],
                    ("reason", "pairs", "share"))
    lines += ["", f"Found by PLIP only ({pl_only} pairs):", ""]
    lines += _table([(r, n, f"{100 * n / max(pl_only, 1):.0f}%") for r, n in s["plip_only_reasons"]],
                    ("reason", "pairs", "share"))
    lines += ["", "By criteria group (donor group / acceptor group of the ChimeraX-compatible typing; `-` = untyped):", ""]
    lines += _table([(g, n) for g, n in s["chimerax_only_groups"]], ("ChimeraX-only group", "pairs"))
    lines += [""]
    lines += _table([(g, n) for g, n in s["plip_only_groups"]], ("PLIP-only group", "pairs"))
    lines += ["", "By element (donor → acceptor):", ""]
    lines += _table([(g, n) for g, n in s["chimerax_only_elements"]], ("ChimeraX-only", "pairs"))
    lines += [""]
    lines += _table([(g, n) for g, n in s["plip_only_elements"]], ("PLIP-only", "pairs"))
    st = result["stability"]
    lines += ["", "## PLIP run-to-run stability", "",
              f"PLIP was run again on every k-th compared complex (k = {st['every']}; {st['n']} complexes) in fresh worker "
              "processes and the H-bond sets (pair and donor side) compared with the first run.", ""]
    lines += _table([("same PYTHONHASHSEED (0)", st["same_seed"]["differing"]),
                     ("another PYTHONHASHSEED (12345)", st["other_seed"]["differing"])],
                    ("rerun", "complexes with a different H-bond set"))
    examples = st["other_seed"]["complexes"][:5] + st["same_seed"]["complexes"][:3]
    if examples:
        lines += ["", "Examples:", ""]
        lines += _table([(e["file"], e["first"], e["second"], "; ".join(e["only_first"][:2]),
                          "; ".join(e["only_second"][:2])) for e in examples],
                        ("file", "bonds (1st)", "bonds (2nd)", "only in 1st", "only in 2nd"))
    lines += ["", "## Other PLIP interaction types found (all compared complexes)", ""]
    lines += _table(sorted(s["plip_interaction_types"].items()), ("type", "count"))
    if s["error_list"]:
        lines += ["", "## Failures", ""]
        lines += _table([(e["file"], e["error"]) for e in s["error_list"]], ("file", "error"))
    lines += ["", "## In words", "", words(s, result), ""]
    return "\n".join(lines)


GLOSS = {
    "sulfur (PLIP: no sulfur H-bonds)": "involve a sulfur atom, which PLIP never types as donor or acceptor",
    "PLIP: dropped inside a salt bridge": "are dropped by PLIP because the two groups already form a salt bridge",
    "PLIP: one H-bond per donor (another acceptor kept)":
        "are dropped by PLIP's one-H-bond-per-donor rule (it keeps the best D–H···A angle)",
    "PLIP: donor has no Open Babel hydrogen / not a donor":
        "have a donor that Open Babel left without a polar hydrogen (mostly Arg NE, His NE2/ND1 by "
        "tautomer choice and Trp NE1 on the protein side, ring NH and OH groups on the ligand side)",
    "PLIP: acceptor not typed by Open Babel": "have an acceptor Open Babel does not type",
    "PLIP: D–H···A ≤ 100° with Open Babel's H (rotatable H: ChimeraX did not test θ)":
        "fail PLIP's D–H···A > 100° test with the hydrogen Open Babel placed on a rotatable group "
        "(OH, NH3+), whose angle ChimeraX does not test without explicit hydrogens",
    "PLIP: D–H···A ≤ 100° with Open Babel's H (ChimeraX's H passed)":
        "fail PLIP's D–H···A > 100° test although ChimeraX's placed hydrogen passed its own θ test",
    "PLIP: D···A ≥ 4.1 Å": "exceed PLIP's 4.1 Å D···A limit",
    "ChimeraX: acceptor angle test fails":
        "fail ChimeraX's acceptor angle tests (φ/θ/υ by acceptor group; PLIP tests only the angle at the H)",
    "ChimeraX: donor angle test fails": "fail ChimeraX's donor angle tests (υ/τ)",
    "ChimeraX: D···A beyond the acceptor group's limit":
        "exceed the acceptor group's D···A limit (3.43–3.82 Å relaxed; PLIP accepts < 4.1 Å)",
    "ChimeraX: D···A beyond the donor group's limit": "exceed the donor group's D···A limit (PLIP accepts < 4.1 Å)",
    "ChimeraX: H···A beyond the donor group's limit": "exceed the donor group's H···A limit (2.49–2.63 Å relaxed)",
    "ChimeraX: θ/τ donor without a placed hydrogen":
        "need a hydrogen ChimeraX cannot place from heavy atoms (θ/τ donors)",
    "ChimeraX: ligand atom not an acceptor (typing)":
        "have a ligand atom ChimeraX's typing does not make an acceptor (e.g. amide, aniline or flavin N)",
    "ChimeraX: protein atom not an acceptor (typing)":
        "have a protein atom ChimeraX does not make an acceptor (mostly Lys NZ and Arg NE, which Open Babel "
        "leaves neutral and types as acceptors)",
    "ChimeraX: protein atom not a donor (typing/protonation)":
        "have a protein donor ChimeraX's residue templates do not allow (Asp/Glu carboxylate O, which "
        "Open Babel protonates)",
    "ChimeraX: ligand atom not a donor (typing/protonation)":
        "have a ligand donor only Open Babel's protonation creates (e.g. phosphate or carboxylate OH)",
    "ChimeraX: metal rule (acceptor coordinates a metal)": "are removed by ChimeraX's metal rule",
}


def _reason_phrases(counts: list[tuple[str, int]], total: int, top: int = 5) -> str:
    parts = []
    for reason, n in counts[:top]:
        parts.append(f"{n} ({100 * n / max(total, 1):.0f}%) {GLOSS.get(reason, '— ' + reason)}")
    rest = sum(n for _, n in counts[top:])
    if rest:
        parts.append(f"{rest} have other reasons")
    return "; ".join(parts)


def words(s: dict, result: dict) -> str:
    """The main disagreements in words, generated from the counts."""
    cx_only = s["chimerax"] - s["shared"]
    pl_only = s["plip"] - s["shared"]
    st = result["stability"]
    files = sorted({c["file"].split(".")[0] for k in ("same_seed", "other_seed") for c in st[k]["complexes"]})
    unstable = (f" (changing: {', '.join(files)}; Open Babel places some ligand hydrogens differently from run "
                f"to run, whatever the hash seed)") if files else ""
    return (
        f"The two engines share {s['shared']} of {s['chimerax'] + s['plip'] - s['shared']} distinct "
        f"protein-atom/ligand-atom pairs (pooled Jaccard {s['pooled_jaccard']:.2f}; per complex mean "
        f"{s['mean_jaccard']:.2f}, median {s['median_jaccard']:.2f}); {s['identical_sets']} of {s['compared']} "
        f"complexes get identical sets ({s['both_empty']} of them with no H-bond in either). The ChimeraX-compatible engine finds {s['chimerax']} bonds, PLIP "
        f"{s['plip']}. Of the {cx_only} pairs only the ChimeraX-compatible engine reports, "
        f"{_reason_phrases(s['chimerax_only_reasons'], cx_only)}. Of the {pl_only} pairs only PLIP reports, "
        f"{_reason_phrases(s['plip_only_reasons'], pl_only)}. In short: PLIP's single criterion (D···A < 4.1 Å, "
        f"D–H···A > 100° with Open Babel's hydrogens) is looser in distance and angle than ChimeraX's per-group "
        f"Mills & Dean tables, but its refinements (salt-bridge exclusion, one bond per donor) and Open Babel's "
        f"protonation choices remove many bonds ChimeraX keeps, and the two disagree on which atoms can donate "
        f"at all. PLIP repeated its H-bond sets exactly in {st['n'] - st['same_seed']['differing']} of "
        f"{st['n']} reruns with the same hash seed and {st['n'] - st['other_seed']['differing']} of {st['n']} "
        f"with another seed{unstable}. The benchmark's answers follow ChimeraX, so PLIP serves as a second "
        f"opinion, not as a substitute."
    )


def plot(result: dict, summary: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    recs = [r for r in result["records"] if "error" not in r]
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.2), layout="constrained", width_ratios=[1, 1, 1.5])
    ax = axes[0]
    ax.hist([r["jaccard"] for r in recs], bins=np.linspace(0, 1, 21), color="#4472c4", edgecolor="white")
    ax.set_xlabel("Jaccard index of H-bond pairs (per complex)")
    ax.set_ylabel("complexes")
    ax.set_title(f"Agreement per complex (n={len(recs)}, pooled {summary['pooled_jaccard']:.2f})")
    ax = axes[1]
    x = np.array([r["chimerax"] for r in recs])
    y = np.array([r["plip"] for r in recs])
    m = max(int(x.max(initial=1)), int(y.max(initial=1))) + 1
    ax.scatter(x + np.random.default_rng(0).uniform(-0.2, 0.2, len(x)), y, s=10, alpha=0.6, color="#ed7d31")
    ax.plot([0, m], [0, m], color="grey", lw=1)
    ax.set_xlabel("H-bonds, ChimeraX-compatible")
    ax.set_ylabel("H-bonds, PLIP")
    ax.set_title("Bonds per complex")
    ax = axes[2]
    items = [(f"ChX-only: {k}", v) for k, v in summary["chimerax_only_reasons"][:5]] + \
            [(f"PLIP-only: {k}", v) for k, v in summary["plip_only_reasons"][:5]]
    labels = [k if len(k) < 62 else k[:59] + "..." for k, _ in items][::-1]
    ax.barh(range(len(items)), [v for _, v in items][::-1],
            color=["#4472c4" if k.startswith("PLIP-only") else "#ed7d31" for k, _ in items][::-1])
    ax.set_yticks(range(len(items)), labels, fontsize=7)
    ax.set_xlabel("pairs")
    ax.set_title("Main reasons for disagreement")
    _atomic(path, lambda p: fig.savefig(p, dpi=110))
    plt.close(fig)


def _atomic(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_text(path: Path, text: str) -> None:
    def w(p):
        Path(p).write_text(text)
    _atomic(path, w)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    ap.add_argument("--out", type=Path, default=REPO / "eval" / "results")
    ap.add_argument("--limit", type=int, default=None, help="only the first N complexes")
    ap.add_argument("--stability-every", type=int, default=3, help="rerun PLIP on every k-th complex")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="rewrite the report and plot from an earlier hbond_agreement.json (no recomputation)")
    args = ap.parse_args(argv)
    if args.from_json is not None:
        data = json.loads(args.from_json.read_text())
        result = {"records": data["records"], "stability": data["stability"]}
        summary = summarize(result)
        summary["wall_seconds"] = data["summary"].get("wall_seconds")
        _write_text(args.out / "hbond_agreement.json", json.dumps({"summary": summary, **result}, indent=1))
        _write_text(args.out / "hbond_agreement.md", markdown(summary, result))
        plot(result, summary, args.out / "hbond_agreement.png")
        return 0
    if not (args.root / "posebusters" / "manifest.csv").is_file():
        print(f"hbond_agreement: no structures under {args.root}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    result = run(args.root, args.limit, max(1, args.stability_every))
    summary = summarize(result)
    summary["wall_seconds"] = round(time.perf_counter() - t0, 1)
    _write_text(args.out / "hbond_agreement.json", json.dumps({"summary": summary, **result}, indent=1))
    _write_text(args.out / "hbond_agreement.md", markdown(summary, result))
    plot(result, summary, args.out / "hbond_agreement.png")
    print(f"{summary['compared']} complexes compared: ChimeraX {summary['chimerax']}, PLIP {summary['plip']}, "
          f"shared {summary['shared']}, pooled Jaccard {summary['pooled_jaccard']:.3f}; "
          f"PLIP reruns differing: {summary['stability']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
