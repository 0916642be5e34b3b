"""``misi-agent hbonds``: the pocket–ligand hydrogen bonds of one structure.

    misi-agent hbonds STRUCTURE [--ligand CCD] [--engine chimerax|plip|both] [--strict] [--protonate] [--json]

Engines: ``chimerax`` is this project's ChimeraX-compatible engine (relaxed criteria by
default, as the benchmark's ground truth; ``--strict`` for ChimeraX's strict criteria;
``--protonate`` gives it explicit pocket hydrogens from PDBFixer/OpenMM instead of only
the hydrogens the heavy atoms fix). ``plip`` runs PLIP 3.0.1 in its worker process (its
own criteria and Open Babel hydrogens; ``--strict`` and ``--protonate`` do not apply).
Plain output: one line per bond, then the answer string in MiSI-Bench's pocket–ligand form
(``ARG 45 NH2 A, O1B; ...``). ``--json``: a list of records, one per bond, each with its
``engine``.
"""
from __future__ import annotations

import argparse
import json

from misi_agent.errors import MisiError

ENGINES = ("chimerax", "plip", "both")


def register(subparsers) -> None:
    p = subparsers.add_parser("hbonds", help="pocket–ligand hydrogen bonds of a structure",
                              description=__doc__.splitlines()[0])
    p.add_argument("structure", help="mmCIF or PDB entry (optionally .gz)")
    p.add_argument("--ligand", metavar="CCD", default=None,
                   help="CCD code of the ligand (default: the largest organic hetero group)")
    p.add_argument("--engine", choices=ENGINES, default="chimerax",
                   help="chimerax (ChimeraX-compatible, default), plip, or both")
    p.add_argument("--strict", action="store_true", help="ChimeraX's strict criteria instead of relaxed")
    p.add_argument("--protonate", action="store_true",
                   help="explicit pocket hydrogens (PDBFixer + OpenMM, pH 7) for the ChimeraX-compatible engine")
    p.add_argument("--json", action="store_true", help="JSON list of bond records instead of text")
    p.set_defaults(func=run)


def _record(engine: str, hb) -> dict:
    """One JSON record; both engines share the core fields."""
    rec = {
        "engine": engine,
        "residue_name": hb.residue_name, "residue_number": hb.residue_number,
        "insertion_code": hb.insertion_code, "chain": hb.chain,
        "protein_atom": hb.protein_atom, "ligand_atom": hb.ligand_atom,
        "donor": hb.donor, "donor_atom": hb.donor_atom, "acceptor_atom": hb.acceptor_atom,
        "distance": round(float(hb.distance), 3),
        "h_distance": None if hb.h_distance is None else round(float(hb.h_distance), 3),
    }
    if engine == "plip":
        rec["group"] = "sidechain" if hb.sidechain else "backbone"
        rec["angles"] = {"theta": hb.angle}
    else:
        rec["group"] = hb.group
        rec["angles"] = {k: v for k, v in hb.angles.items() if v is not None}
    return rec


def _line(rec: dict) -> str:
    res = f"{rec['residue_name']} {rec['residue_number']}{rec['insertion_code']} {rec['protein_atom']} {rec['chain']}"
    h = f"  H···A {rec['h_distance']:.2f}" if rec["h_distance"] is not None else ""
    return (f"{rec['engine']:<8}  {res:<18} {rec['ligand_atom']:<6} donor {rec['donor']:<7}  "
            f"D···A {rec['distance']:.2f}{h}  {rec['group']}")


def run(args: argparse.Namespace) -> int:
    from misi_agent.structure import load_complex
    from misi_agent.tools.hbond_format import format_pocket_ligand

    if args.engine == "plip" and (args.strict or args.protonate):
        raise MisiError("--strict and --protonate apply to the chimerax engine, not to PLIP")
    cx = load_complex(args.structure, args.ligand)
    engines = ("chimerax", "plip") if args.engine == "both" else (args.engine,)
    results: dict[str, list] = {}
    notes: dict[str, str] = {}
    for engine in engines:
        if engine == "chimerax":
            from misi_agent.tools.hbonds import find_hbonds
            explicit = None
            mode = "strict" if args.strict else "relaxed"
            notes[engine] = mode
            if args.protonate:
                from misi_agent.tools.protonation import protonate_pocket
                explicit = protonate_pocket(cx).explicit_h()
                notes[engine] += ", explicit pocket hydrogens"
            results[engine] = find_hbonds(cx, mode=mode, explicit_h=explicit)
        else:
            from misi_agent.tools.plip_tool import plip_interactions
            results[engine] = list(plip_interactions(cx).hbonds)
            notes[engine] = "PLIP 3.0.1"
    records = [_record(engine, hb) for engine in engines for hb in results[engine]]
    if args.json:
        print(json.dumps(records, indent=1))
        return 0
    key = cx.ligand_key
    print(f"{cx.pdb_id} {cx.ligand_code} {key.chain} {key.number}{key.ins_code}")
    for engine in engines:
        print(f"{engine}: {len(results[engine])} H-bond(s) ({notes[engine]})")
        for rec in records:
            if rec["engine"] == engine:
                print("  " + _line(rec))
        print(f"answer ({engine}): {format_pocket_ligand(results[engine]) or 'none'}")
    return 0
