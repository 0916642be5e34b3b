"""Counts over the PoseBusters ligands' CCD definitions that image-only chemistry relies on.

When the pictures hide an atom, the H-bond rules need a default for what is left: a P short of neighbours,
an O drawn without one. This script counts, over the ligand of every entry in the manifest (the
wwPDB Chemical Component Dictionary shipped with biotite, offline):

* heavy neighbours per P (every P of these ligands has four: the basis of
  :func:`misi_agent.tools.identity.missing_phosphate_oxygens`);
* the O atoms that carry a hydrogen in the CCD's neutral form, and those that do not, with the terminal
  O of a P apart (ChimeraX types those as phosphate O⁻, acceptors only, whatever the CCD's hydrogens):
  the basis of ``image_hbonds._lone_oxygen_donor``.

Usage::

    python eval/ligand_priors.py [--manifest ../shared/data/structures/posebusters/manifest.csv]
"""
from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

import biotite.structure.info as info

DEFAULT_MANIFEST = (Path(__file__).resolve().parents[2] / "shared" / "data" / "structures" / "posebusters"
                    / "manifest.csv")


def ligand_priors(codes: list[str]) -> Counter:
    """Counts over the CCD definitions of ``codes`` (one ligand a code, as listed): ``("P", k)`` P atoms with
    k heavy neighbours, ``("O", "H")`` / ``("O", "noH")`` O with / without a hydrogen, ``("O on P", ...)`` the
    terminal O of a P among them, ``"ligands"`` the definitions read (a code the CCD lacks is skipped)."""
    out: Counter = Counter()
    for code in codes:
        try:
            res = info.residue(code)
        except KeyError:
            continue
        if res is None or res.bonds is None:
            continue
        out["ligands"] += 1
        el = [str(e).upper() for e in res.element]
        nb: dict[int, list[int]] = {i: [] for i in range(len(el))}
        for a, b, _ in res.bonds.as_array():
            nb[int(a)].append(int(b))
            nb[int(b)].append(int(a))
        for i, e in enumerate(el):
            heavy = [j for j in nb[i] if el[j] != "H"]
            if e == "P":
                out[("P", len(heavy))] += 1
            if e == "O":
                h = "H" if len(heavy) < len(nb[i]) else "noH"
                out[("O", h)] += 1
                if len(heavy) == 1 and el[heavy[0]] == "P":
                    out[("O on P", h)] += 1
    return out


def manifest_codes(path: Path) -> list[str]:
    """The ``ligand_ccd`` column of a structures manifest, in its order."""
    with open(path, newline="") as fh:
        return [r["ligand_ccd"] for r in csv.DictReader(fh)]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
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


if __name__ == "__main__":
    main()
