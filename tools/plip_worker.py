"""PLIP 3.0.1 worker: a separate process that runs PLIP and answers in JSON lines.

Why a separate process: PLIP needs Open Babel, whose plugins crash RDKit (and disturb
PyMOL) when both load in one process. The main process therefore never imports
``openbabel`` or ``plip``; it starts this file as a script (``python -I plip_worker.py``,
so nothing of ``misi_agent`` is imported here either) and talks to it through pipes.

Protocol: one JSON object per line on stdin, one JSON object per line on stdout.

Request:  ``{"id": 1, "pdb": "<PDB text>", "ligand_serials": [...], "name": "1abc", "details": false}``
Answer:   ``{"id": 1, "ok": true, "sites": [...], "seconds": 0.4}`` or
          ``{"id": 1, "ok": false, "error": "one line"}``

``ligand_serials`` are the PDB serial numbers of the ligand of interest; every PLIP
ligand (a single hetero group or a covalently linked composite) holding any of them is
analysed, and every interaction is reported with the PDB serial numbers of its atoms
(PLIP's ``*_orig_idx``), which the caller maps back to atom names. The protocol is
deliberately free of PLIP objects so that the caller owns its own types. With
``details`` each site also lists PLIP's H-bond candidates (donors with their hydrogens,
acceptors, H-bonds before refinement), which explain disagreements with other tools.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback


def _xyz(atom) -> list[float]:
    return [float(v) for v in atom.coords]


def _site_record(site) -> dict:
    """All interaction types of one PLIP interaction set, as plain JSON."""
    hbonds = []
    for hb in list(site.hbonds_pdon) + list(site.hbonds_ldon):
        hbonds.append({
            "donor": int(hb.d_orig_idx), "acceptor": int(hb.a_orig_idx),
            "donor_xyz": _xyz(hb.d), "acceptor_xyz": _xyz(hb.a), "h_xyz": _xyz(hb.h),
            "distance_ad": float(hb.distance_ad), "distance_ah": float(hb.distance_ah),
            "angle": float(hb.angle), "protisdon": bool(hb.protisdon), "sidechain": bool(hb.sidechain),
            "dtype": str(hb.dtype), "atype": str(hb.atype),
        })
    hydrophobic = [{"protein": int(h.bsatom_orig_idx), "ligand": int(h.ligatom_orig_idx), "distance": float(h.distance)}
                   for h in site.hydrophobic_contacts]
    pistacking = [{"protein": [int(i) for i in p.proteinring.atoms_orig_idx],
                   "ligand": [int(i) for i in p.ligandring.atoms_orig_idx],
                   "distance": float(p.distance), "angle": float(p.angle), "offset": float(p.offset), "type": str(p.type)}
                  for p in site.pistacking]
    pication = []
    for p in list(site.pication_laro) + list(site.pication_paro):
        charge = [int(i) for i in p.charge.atoms_orig_idx]
        ring = [int(i) for i in p.ring.atoms_orig_idx]
        pication.append({
            "protein": charge if p.protcharged else ring, "ligand": ring if p.protcharged else charge,
            "distance": float(p.distance), "offset": float(p.offset), "protcharged": bool(p.protcharged),
            "fgroup": str(getattr(p.charge, "fgroup", "")) if not p.protcharged else "",
        })
    saltbridges = []
    for s in list(site.saltbridge_lneg) + list(site.saltbridge_pneg):
        pos = [int(i) for i in s.positive.atoms_orig_idx]
        neg = [int(i) for i in s.negative.atoms_orig_idx]
        saltbridges.append({
            "protein": pos if s.protispos else neg, "ligand": neg if s.protispos else pos,
            "distance": float(s.distance), "protispos": bool(s.protispos),
            "fgroup": str(getattr(s.negative if s.protispos else s.positive, "fgroup", "")),
        })
    halogen = [{"acceptor": int(h.acc_orig_idx), "donor": int(h.don_orig_idx), "distance": float(h.distance),
                "don_angle": float(h.don_angle), "acc_angle": float(h.acc_angle)} for h in site.halogen_bonds]
    water = [{"acceptor": int(w.a_orig_idx), "donor": int(w.d_orig_idx), "water": int(w.water_orig_idx),
              "distance_aw": float(w.distance_aw), "distance_dw": float(w.distance_dw),
              "d_angle": float(w.d_angle), "w_angle": float(w.w_angle), "protisdon": bool(w.protisdon)}
             for w in site.water_bridges]
    metal = [{"metal": int(m.metal_orig_idx), "target": int(m.target_orig_idx), "distance": float(m.distance),
              "location": str(m.location), "target_type": str(m.target_type), "geometry": str(m.geometry),
              "coordination": int(m.coordination_num), "rms": float(m.rms), "complexnum": int(m.complexnum)}
             for m in site.metal_complexes]
    return {"hbonds": hbonds, "hydrophobic": hydrophobic, "pistacking": pistacking, "pication": pication,
            "saltbridges": saltbridges, "halogen": halogen, "water_bridges": water, "metal": metal}


def _candidates(site) -> dict:
    """PLIP's H-bond candidates: donors (with Open Babel's hydrogens), acceptors, and all
    geometric H-bonds before PLIP's salt-bridge and one-per-donor refinement."""
    def donors(pairs) -> list:
        out: dict[int, list] = {}
        for p in pairs:
            if p.type == "regular":
                out.setdefault(int(p.d_orig_idx), []).append(_xyz(p.h))
        return [[k, v] for k, v in sorted(out.items())]

    def acceptors(accs) -> list:
        return sorted({int(a.a_orig_idx) for a in accs})

    lig, bs = site.ligand, site.bindingsite
    return {
        "ligand_donors": donors(lig.get_hbd()), "ligand_acceptors": acceptors(lig.get_hba()),
        "protein_donors": donors(bs.get_hbd()), "protein_acceptors": acceptors(bs.get_hba()),
        "all_hbonds": [[int(h.d_orig_idx), int(h.a_orig_idx), bool(h.protisdon), float(h.angle), float(h.distance_ad)]
                       for h in list(site.all_hbonds_pdon) + list(site.all_hbonds_ldon)],
    }


def analyse(pdb_text: str, ligand_serials: list[int], workdir: str, details: bool = False) -> list[dict]:
    """Run PLIP on one PDB text; analyse only the ligands holding ``ligand_serials``."""
    from plip.basic import config
    from plip.structure.preparation import PDBComplex

    config.NOFIXFILE = True  # PLIP must not write "fixed" copies next to our files
    path = os.path.join(workdir, "complex.pdb")
    with open(path, "w") as fh:
        fh.write(pdb_text)
    mol = PDBComplex()
    mol.output_path = workdir
    mol.load_pdb(path)
    wanted = set(int(s) for s in ligand_serials)
    sites = []
    for lig in mol.ligands:
        internal = mol.Mapper.ligandmaps[lig.mol.title].values()
        serials = {int(mol.Mapper.proteinmap[i]) for i in internal}
        if not serials & wanted:
            continue
        mol.characterize_complex(lig)
        record = _site_record(mol.interaction_sets[lig.mol.title])
        if details:
            record["candidates"] = _candidates(mol.interaction_sets[lig.mol.title])
        record["site"] = lig.mol.title
        record["members"] = [[str(n), str(c), int(r)] for n, c, r in lig.members]
        record["ligand_serials"] = sorted(serials)
        sites.append(record)
    return sites


def main() -> int:
    # Keep the real stdout for the protocol; anything else that writes to fd 1 (PLIP's
    # logging, Open Babel's C++ streams) goes to stderr instead.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import logging
    logging.disable(logging.WARNING)
    from openbabel import pybel  # noqa: F401  (load once, before the first request)
    pybel.ob.obErrorLog.StopLogging()
    proto.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        req_id = None
        try:
            req = json.loads(line)
            req_id = req.get("id")
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="plip_") as tmp:
                sites = analyse(req["pdb"], req["ligand_serials"], tmp, bool(req.get("details")))
            answer = {"id": req_id, "ok": True, "sites": sites, "seconds": time.perf_counter() - t0}
        except (Exception, SystemExit) as exc:  # PLIP calls sys.exit on unreadable input; keep serving
            traceback.print_exc(file=sys.stderr)
            msg = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
            answer = {"id": req_id, "ok": False, "error": msg}
        proto.write(json.dumps(answer) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
