"""Counts over the PoseBusters ligands' CCD definitions that image-only chemistry relies on.

When the pictures hide an atom, the H-bond rules need a default for what is left: a P short of neighbours,
an O drawn without one. This script counts, over the ligand of every entry in the manifest (the
wwPDB Chemical Component Dictionary shipped with biotite, offline):

* heavy neighbours per P (every P of these ligands has four: the basis of
  :func:`misi_agent.tools.identity.missing_phosphate_oxygens`);
* the O atoms that carry a hydrogen in the CCD's neutral form, and those that do not, with the terminal
  O of a P apart (ChimeraX types those as phosphate O⁻, acceptors only, whatever the CCD's hydrogens):
  the basis of ``image_hbonds._lone_oxygen_donor``;
* with ``--contacts``, over the entries themselves (their ligand and its pocket, as
  ``misi_agent.structure.load_complex`` takes them), the ligand O within 3.2 Å of a protein carboxylate O (Asp,
  Glu, a C terminus) or of a backbone O, by whether the CCD gives them a hydrogen: why a lone O may donate to a
  carboxylate (about 1 min).

Usage::

    python eval/ligand_priors.py [--manifest ../shared/data/structures/posebusters/manifest.csv] [--contacts]
"""
from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

import biotite.structure.info as info

DEFAULT_MANIFEST = (Path(__file__).resolve().parents[2] / "shared" / "data" / "structures" / "posebusters"
                    / "manifest.csv")


def ccd_graph(code: str) -> tuple[list[str], dict[int, list[tuple[int, int]]], list[str]] | None:
    """The CCD definition of ``code`` as a graph: elements (upper case), each atom's bonded neighbours with the bond
    order, atom names; None when the CCD lacks the code or its bonds."""
    try:
        res = info.residue(code)
    except KeyError:
        return None
    if res is None or res.bonds is None:
        return None
    el = [str(e).upper() for e in res.element]
    nb: dict[int, list[tuple[int, int]]] = {i: [] for i in range(len(el))}
    for a, b, order in res.bonds.as_array():
        nb[int(a)].append((int(b), int(order)))
        nb[int(b)].append((int(a), int(order)))
    return el, nb, [str(n) for n in res.atom_name]


def ligand_priors(codes: list[str]) -> Counter:
    """Counts over the CCD definitions of ``codes`` (one ligand a code, as listed): ``("P", k)`` P atoms with
    k heavy neighbours, ``("O", "H")`` / ``("O", "noH")`` O with / without a hydrogen, ``("O on P", ...)`` the
    terminal O of a P among them, ``"ligands"`` the definitions read (a code the CCD lacks is skipped)."""
    out: Counter = Counter()
    for code in codes:
        graph = ccd_graph(code)
        if graph is None:
            continue
        el, nb, _ = graph
        out["ligands"] += 1
        for i, e in enumerate(el):
            heavy = [j for j, _ in nb[i] if el[j] != "H"]
            if e == "P":
                out[("P", len(heavy))] += 1
            if e == "O":
                h = "H" if len(heavy) < len(nb[i]) else "noH"
                out[("O", h)] += 1
                if len(heavy) == 1 and el[heavy[0]] == "P":
                    out[("O on P", h)] += 1
    return out


CONTACT_A = 3.2  # Å: an O···O contact this short needs a hydrogen between the two O


def oxygen_kinds(code: str) -> dict[str, str]:
    """Each O of the CCD definition of ``code`` by name: "H" (carries a hydrogen; acids apart), "acid" (an O of a
    carboxylic acid, which ChimeraX types as a carboxylate), "P" (on a P: phosphate O⁻ to ChimeraX), "noH" (the
    rest: carbonyl, ether). Empty when the CCD lacks the code."""
    graph = ccd_graph(code)
    if graph is None:
        return {}
    el, nb, names = graph
    out = {}
    for i, e in enumerate(el):
        if e != "O":
            continue
        heavy = [j for j, _ in nb[i] if el[j] != "H"]
        on = heavy[0] if len(heavy) == 1 else None
        if on is not None and el[on] == "P":
            kind = "P"
        elif on is not None and el[on] == "C" and len(nb[on]) == 3 and \
                [order for j, order in nb[on] if j != i and el[j] == "O"] == [2]:  # its C's one other O is C=O
            kind = "acid"
        else:
            kind = "H" if len(heavy) < len(nb[i]) else "noH"
        out[names[i]] = kind
    return out


def carboxylate_contacts(manifest: Path, cutoff: float = CONTACT_A) -> Counter:
    """Over the entries of ``manifest`` (files beside it): ``(partner, kind)`` counts of the ligand O within
    ``cutoff`` of a protein carboxylate O (``partner`` "carboxylate": an O the residue templates make a carboxylate
    acceptor, Asp/Glu and a C terminus; any residue's OXT) or of a backbone O ("backbone O"), ``kind`` from
    :func:`oxygen_kinds`; ``"entries"`` read, ``"unreadable"`` skipped. Each ligand O counts once per partner."""
    import numpy as np

    from misi_agent.errors import MisiError
    from misi_agent.knowledge.hbonds import load_templates
    from misi_agent.structure import load_complex

    templates = load_templates()

    def carboxylate(residue: str, atom: str) -> bool:
        t = templates.atom(residue, atom) or templates.backbone.get(atom)  # OXT of a residue without a template too
        return t is not None and t.acceptor == "carboxylate"

    out: Counter = Counter()
    with open(manifest, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        kinds = oxygen_kinds(row["ligand_ccd"])
        try:
            cx = load_complex(manifest.parent / row["file"], ligand=row["ligand_ccd"])
        except (MisiError, OSError, ValueError):
            out["unreadable"] += 1
            continue
        out["entries"] += 1
        lig, p = cx.ligand, cx.pocket
        lo = [i for i in range(lig.array_length())
              if str(lig.element[i]).upper() == "O" and str(lig.atom_name[i]) in kinds]
        names = list(zip(p.res_name.tolist(), p.atom_name.tolist()))
        partners = {"carboxylate": [k for k, (r, a) in enumerate(names) if carboxylate(r, a)],
                    "backbone O": [k for k, (_, a) in enumerate(names) if a == "O"]}
        for partner, idx in partners.items():
            if not idx or not lo:
                continue
            d = np.linalg.norm(lig.coord[lo][:, None] - p.coord[idx][None], axis=2).min(axis=1)
            for i, di in zip(lo, d):
                if di <= cutoff:
                    out[(partner, kinds[str(lig.atom_name[i])])] += 1
    return out


def manifest_codes(path: Path) -> list[str]:
    """The ``ligand_ccd`` column of a structures manifest, in its order."""
    with open(path, newline="") as fh:
        return [r["ligand_ccd"] for r in csv.DictReader(fh)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    ap.add_argument("--contacts", action="store_true", help="also count ligand O in contact with carboxylate and "
                    "backbone O in the entries (about 1 min)")
    args = ap.parse_args(argv)
    try:
        codes = manifest_codes(args.manifest)
    except (OSError, KeyError, csv.Error) as exc:
        raise SystemExit(f"error: cannot read ligand codes from {args.manifest}: {exc!r}") from None
    c = ligand_priors(codes)
    print(f"ligand definitions read: {c['ligands']} of {len(codes)}")
    p_by_degree = {k[1]: v for k, v in sorted(c.items(), key=str) if isinstance(k, tuple) and k[0] == "P"}
    print("P by heavy neighbours:", p_by_degree)
    donors = c[("O", "H")] - c[("O on P", "H")]
    print(f"O: {c[('O', 'H')] + c[('O', 'noH')]} in all; with a hydrogen, not on a P (hydroxyl, acid): {donors}; "
          f"the rest (carbonyl, ether, phosphate O): {c[('O', 'noH')] + c[('O on P', 'H')]}, "
          f"of which terminal O of a P: {c[('O on P', 'H')] + c[('O on P', 'noH')]}")
    if args.contacts:
        k = carboxylate_contacts(args.manifest)
        print(f"entries read: {k['entries']} (unreadable: {k['unreadable']}); ligand O within {CONTACT_A} A of ...")
        for partner in ("carboxylate", "backbone O"):
            n = {kind: k[(partner, kind)] for kind in ("H", "acid", "P", "noH")}
            total = sum(n.values())
            print(f"  a {partner}: {total}, with a hydrogen {n['H']} ({n['H'] / max(1, total):.0%}), "
                  f"acid O {n['acid']}, O on a P {n['P']}, no hydrogen {n['noH']}")


if __name__ == "__main__":
    main()
