"""Speed of spotting labels hidden in piles (tools/label_spotting.py), against reading the labels in the same run.

Renders the six views of a real entry (PyMOL by default: its labels pile up), reads their labels once (the
reference: every image-only H-bond or interaction-location answer reads them), then times what spotting adds:
learning the templates and building the spotters, spotting the two texts a T8 question names in every view, and
reading the hidden residue labels of a T9 answer, and placing a ligand atom where its name labels meet
(tools/label_triangulation.py: the label offset learnt, the name's places read or spotted, triangulated; needs the
reconstruction, made once and not timed), and placing every read ligand name so for a T9 answer
(image_hbonds.with_labelled_ligand_atoms). Prints seconds and the ratio of each to the reading.

    python benchmarks/label_spotting_speed.py [--entry 6yqw] [--ligand 82I] [--renderer pymol|raster] [--repeat 3]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from misi_agent.camera import VIEW_NAMES
from misi_agent.scene import scene_from_complex
from misi_agent.structure import load_complex
from misi_agent.tools.label_reading import read_labels
from misi_agent.tools.label_spotting import spotters, with_hidden_residue_labels
from misi_agent.tools.image_hbonds import with_labelled_ligand_atoms
from misi_agent.tools.label_triangulation import label_offset, text_places, text_point
from misi_agent.tools.reconstruction import reconstruct

FIXTURES = Path(__file__).resolve().parents[1] / "misi_agent" / "data" / "structures"


def render(entry: str, ligand: str, renderer: str) -> dict:
    cx = load_complex(FIXTURES / f"{entry}.cif.gz", ligand=ligand)
    scenes = {v: scene_from_complex(cx, v) for v in VIEW_NAMES}
    if renderer == "pymol":
        from misi_agent.render.pymol_backend import PyMOLRenderer

        with PyMOLRenderer() as ren:
            return {v: ren.render(sc).image for v, sc in scenes.items()}
    from misi_agent.render.raster import RasterRenderer

    return {v: RasterRenderer().render(sc).image for v, sc in scenes.items()}


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entry", default="6yqw")
    ap.add_argument("--ligand", default="82I")
    ap.add_argument("--renderer", default="pymol", choices=("pymol", "raster"))
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    images = render(a.entry, a.ligand, a.renderer)
    t_read, labels = best_of(a.repeat, lambda: {v: read_labels(im) for v, im in images.items()})
    t_build, sp = best_of(a.repeat, lambda: spotters(images, labels))
    residue = next(lab.text for lab in labels["front"].of_kind("residue"))
    ligand = next(lab.text for lab in labels["front"].of_kind("ligand"))

    def t8():
        s = spotters(images, labels)
        return [(k["residue"].spot(residue, 1), k["ligand"].spot(ligand, 1)) for k in s.values()
                if "residue" in k and "ligand" in k]

    t_t8, _ = best_of(a.repeat, t8)
    t_t9, out = best_of(a.repeat, lambda: with_hidden_residue_labels(images, labels))
    added = sum(len(out[v].labels) - len(labels[v].labels) for v in labels)
    rec = reconstruct(images)

    names = [lab.text for v in labels for lab in labels[v].of_kind("ligand") if len(lab.text) >= 2]
    name = max(sorted(set(names)), key=names.count)  # the ligand name read in most views

    def placed():
        off, _ = label_offset(rec, labels)
        return text_point(rec, text_places(labels, sp, "ligand", name), off, name)

    t_tri, point = best_of(a.repeat, placed)
    t_lig, (_, named) = best_of(a.repeat, lambda: with_labelled_ligand_atoms(rec, labels, sp))
    print(f"{a.entry} ({a.renderer}, six views {images['front'].size[0]} px)")
    print(f"  read the labels (reference)        {t_read:6.2f} s")
    print(f"  templates + spotters               {t_build:6.2f} s  ({t_build / t_read:.2f}x reading)")
    print(f"  T8: spotters + two texts per view  {t_t8:6.2f} s  ({t_t8 / t_read:.2f}x reading)")
    print(f"  T9: hidden residue labels          {t_t9:6.2f} s  ({t_t9 / t_read:.2f}x reading; {added} labels added)")
    where = f"placed from {len(point.views)} views" if point else "not placed"
    print(f"  T8: a ligand atom from its labels  {t_tri:6.2f} s  ({t_tri / t_read:.3f}x reading; {name} {where})")
    print(f"  T9: ligand atoms from their labels {t_lig:6.2f} s  ({t_lig / t_read:.2f}x reading; {len(named)} named)")


if __name__ == "__main__":
    main()
