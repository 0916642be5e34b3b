"""Independent check of generated answer keys.

    python eval/check_answer_keys.py OUT_DIR [--no-hbonds] [--tolerance 1.0]

For every item under ``OUT_DIR/items/*/question.json`` (written by ``misi-agent bench
generate``) this re-derives the truth from what was drawn — the per-image view coordinates
and screen positions saved in the item's ``atoms.npz`` — and from the structure itself,
without using the generator's code:

* every image: the saved screen positions are the camera projection of the saved view
  coordinates (the renderer reported what the scene holds);
* translation / rotation / zooming: parsing the answer and applying its commands to the
  front view reproduces the after-image's atom positions within ``--tolerance`` px
  (atoms visible in the after image); the value lies on the task's grid;
* docking: the answer applied to the ligand of the "both" image (rolls about the ligand
  centroid) puts every ligand atom on its docked position within tolerance; it is a roll
  then a move along x; in the "both" image no ligand atom is drawn on a pocket atom;
* translation + rotation, rotation + rotation: the operation (meta) reproduces the
  reference after-image; applied to the target (T5) or to image 4's state (T6) it
  reproduces exactly one option image — the answer's — and misses the others by ≥ 8 px;
* interaction location: the bond atoms are found by name in the front view; the truth
  (−centroid x, −centroid y, rounded half up to whole Å) is the text of exactly one
  option, the answer's; after it the centroid lies within half an Å (diagonal) of the
  line of sight through the image centre;
* residue–ligand / pocket–ligand interaction: the H-bond engine run on the source
  structure gives exactly the answer's set (for T4, of the shown residue; "No" when
  none); T4 images show only that residue and the ligand.

Prints per-task pass counts and every failure; exit status 1 when anything fails.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

import misi_agent  # noqa: F401  (before numpy: pins OpenBLAS's kernel, misi_agent.reproducibility)
import numpy as np

from misi_agent.bench import tasks as T
from misi_agent.bench.answers import parse_bond_list
from misi_agent.camera import Camera, parse_commands, apply_commands

MIN_OPTION_PX = 8.0


class Item:
    """A generated item read back: question, meta and the saved atom arrays per image."""

    def __init__(self, qpath: Path):
        self.dir = qpath.parent
        self.q = json.loads(qpath.read_text(encoding="utf-8"))
        self.meta = self.q["meta"]
        self.size = int(self.meta["size"])
        self.cam = Camera(self.size, self.size)
        with np.load(self.dir / self.meta["atoms"]) as z:
            self.arrays = {k: z[k] for k in z.files}

    def get(self, image: str, field: str) -> np.ndarray:
        return self.arrays[f"{image}/{field}"]

    def project(self, coords: np.ndarray) -> np.ndarray:
        return self.cam.project(coords)[0]


def max_error(item: Item, coords: np.ndarray, target: str) -> float:
    """Largest screen distance between projected ``coords`` and the target image's saved positions (visible atoms)."""
    vis = item.get(target, "visible")
    if not vis.any():
        return math.inf
    d = np.linalg.norm(item.project(coords)[vis] - item.get(target, "screen")[vis], axis=1)
    return float(np.nanmax(d)) if np.all(np.isfinite(d)) else math.inf


def mean_difference(item: Item, coords: np.ndarray, target: str) -> float:
    vis = item.get(target, "visible")
    d = np.linalg.norm(np.nan_to_num(item.project(coords)[vis] - item.get(target, "screen")[vis]), axis=1)
    return float(d.mean()) if d.size else 0.0


def same_atoms(item: Item, a: str, b: str) -> bool:
    return all(np.array_equal(item.get(a, f), item.get(b, f)) for f in ("atom_name", "residue", "is_ligand"))


def check_common(item: Item) -> list[str]:
    problems = []
    info = T.TASKS[item.q["task"]]
    names = item.meta["image_names"]
    if len(item.q["images"]) != info.n_images or len(names) != info.n_images:
        problems.append(f"{len(item.q['images'])} images, task takes {info.n_images}")
    for rel in item.q["images"]:
        if not (item.dir / rel).is_file():
            problems.append(f"missing image {rel}")
    for name in names:
        coords, screen = item.get(name, "coords"), item.get(name, "screen")
        vis = item.get(name, "visible")
        err = np.linalg.norm(item.project(coords)[vis] - screen[vis], axis=1)
        if err.size and float(err.max()) > 1e-3:
            problems.append(f"{name}: saved screen positions are not the projection of its coordinates")
    return problems


def _on_grid(cmd, grid) -> bool:
    return cmd.axis in grid.axes and grid.contains(cmd.value)


def check_unit(item: Item, tol: float) -> list[str]:
    task = item.q["task"]
    cmds = parse_commands(item.q["answer"])
    grid = {T.TRANSLATION: T.TRANSLATION_GRID, T.ROTATION: T.ROTATION_GRID, T.ZOOMING: T.ZOOM_GRID}[task]
    op = "roll" if task == T.ROTATION else "move"
    problems = []
    if len(cmds) != 1 or cmds[0].op != op or not _on_grid(cmds[0], grid):
        problems.append(f"answer {item.q['answer']!r} is not one {op} on the task's grid")
    if not same_atoms(item, "front", "after"):
        problems.append("front and after images hold different atoms")
    err = max_error(item, apply_commands(item.get("front", "coords"), cmds), "after")
    if err > tol:
        problems.append(f"answer applied to the front view misses the after image by {err:.2f} px")
    return problems


def _matching_options(item: Item, coords: np.ndarray, tol: float) -> tuple[list[str], dict[str, float]]:
    hits, diffs = [], {}
    for letter in T.CHOICE_LETTERS:
        name = item.meta["option_images"][letter]
        if max_error(item, coords, name) <= tol:
            hits.append(letter)
        diffs[letter] = mean_difference(item, coords, name)
    return hits, diffs


def check_multistep(item: Item, tol: float) -> list[str]:
    task = item.q["task"]
    cmds = parse_commands(item.meta["params"]["commands"])
    problems = []
    if task == T.TRANSLATION_ROTATION:
        ref_front, ref_after, base = "reference_front", "reference_after", "target_front"
        if not (cmds[0].op == "move" and _on_grid(cmds[0], T.TRANSROT_F1_GRID) and cmds[1].op == "roll"
                and _on_grid(cmds[1], T.TRANSROT_F2_GRID)):
            problems.append(f"operation {item.meta['params']['commands']!r} is not a T1 move then a T2 roll")
    else:
        ref_front, ref_after, base = "front", "after", "after"
        if not (all(c.op == "roll" and _on_grid(c, T.ROTROT_GRID) for c in cmds) and cmds[0].axis != cmds[1].axis):
            problems.append(f"operation {item.meta['params']['commands']!r} is not two rolls about different axes")
    err = max_error(item, apply_commands(item.get(ref_front, "coords"), cmds), ref_after)
    if err > tol:
        problems.append(f"operation misses the reference after image by {err:.2f} px")
    truth = apply_commands(item.get(base, "coords"), cmds)
    hits, diffs = _matching_options(item, truth, tol)
    if hits != [item.q["answer"]]:
        problems.append(f"options reproduced by the operation: {hits}, answer {item.q['answer']}")
    for letter, d in diffs.items():
        if letter != item.q["answer"] and d < MIN_OPTION_PX:
            problems.append(f"option {letter} differs from the truth by only {d:.1f} px")
    names = [item.meta["option_images"][L] for L in T.CHOICE_LETTERS]
    for i in range(4):
        for j in range(i + 1, 4):
            d = np.linalg.norm(np.nan_to_num(item.get(names[i], "screen") - item.get(names[j], "screen")), axis=1).mean()
            if d < MIN_OPTION_PX:
                problems.append(f"options {names[i]} and {names[j]} differ by only {d:.1f} px")
    return problems


def check_docking(item: Item, tol: float) -> list[str]:
    cmds = parse_commands(item.q["answer"])
    problems = []
    if not (len(cmds) == 2 and cmds[0].op == "roll" and _on_grid(cmds[0], T.DOCKING_ROLL_GRID)
            and cmds[1].op == "move" and cmds[1].axis == "x" and T.DOCKING_SHIFT_GRID.contains(cmds[1].value)):
        problems.append(f"answer {item.q['answer']!r} is not 'roll a θ, move x d' on the task's grids")
    coords = item.get("both_front", "coords").copy()
    lig = item.get("both_front", "is_ligand")
    coords[lig] = apply_commands(coords[lig], cmds)
    docked = item.get("ref_docked", "screen")
    err = float(np.linalg.norm(item.project(coords)[lig] - docked[lig], axis=1).max())
    if err > tol:
        problems.append(f"answer misses the docked ligand by {err:.2f} px")
    if not np.array_equal(item.get("ref_docked", "atom_name"), item.get("both_front", "atom_name")):
        problems.append("docked reference and 'both' image hold different atoms")
    screen = item.get("both_front", "screen")
    gap = np.linalg.norm(screen[lig][:, None, :] - screen[~lig][None, :, :], axis=2).min()
    if gap < 4.0:
        problems.append(f"displaced ligand drawn within {gap:.1f} px of a pocket atom")
    return problems


def _atom(item: Item, image: str, residue: str, atom: str) -> int:
    hit = np.flatnonzero((item.get(image, "residue") == residue) & (item.get(image, "atom_name") == atom))
    if hit.size != 1:
        raise LookupError(f"atom {residue} {atom} found {hit.size} times")
    return int(hit[0])


def check_location(item: Item, tol: float) -> list[str]:
    b = item.meta["params"]["bond"]
    res = f"{b['chain']}|{b['residue_number']}|{b['insertion_code']}|{b['residue_name']}"
    try:
        pi = _atom(item, "front", res, b["protein_atom"])
        li = _atom(item, "front", "ligand", b["ligand_atom"])
    except LookupError as exc:
        return [str(exc)]
    coords = item.get("front", "coords")
    c = (coords[pi] + coords[li]) / 2.0
    truth = (int(math.floor(-c[0] + 0.5)), int(math.floor(-c[1] + 0.5)))
    problems = []
    matches = []
    for letter, text in zip(T.CHOICE_LETTERS, item.q["options"]):
        cmds = parse_commands(text)
        net = [0.0, 0.0, 0.0]
        for cmd in cmds:
            if cmd.op != "move":
                problems.append(f"option {letter} {text!r} is not a translation")
            net["xyz".index(cmd.axis)] += cmd.value
        if net[2] == 0 and (round(net[0]), round(net[1])) == truth:
            matches.append(letter)
    if matches != [item.q["answer"]]:
        problems.append(f"options equal to the truth {truth}: {matches}, answer {item.q['answer']}")
    moved = apply_commands(coords, parse_commands(f"move x {truth[0]}, move y {truth[1]}"))
    cm = (moved[pi] + moved[li]) / 2.0
    off = float(np.linalg.norm(item.project(cm[None])[0] - np.array([item.size / 2, item.size / 2])))
    allowed = item.cam.focal * (0.5 * math.sqrt(2)) / -cm[2] + tol
    if off > allowed:
        problems.append(f"after the answer the bond centre is {off:.1f} px from the image centre (allowed {allowed:.1f})")
    return problems


_HB_CACHE: dict[tuple[str, str], set] = {}


def engine_bonds(source: str, ligand: str) -> set[tuple]:
    """(chain, number+ins, residue name, residue atom, ligand atom) of every engine H-bond."""
    key = (source, ligand)
    if key not in _HB_CACHE:
        from misi_agent.structure import load_complex
        from misi_agent.tools.hbonds import find_hbonds

        cx = load_complex(source, ligand)
        _HB_CACHE[key] = {(str(h.chain), f"{int(h.residue_number)}{h.insertion_code or ''}", str(h.residue_name),
                           str(h.protein_atom), str(h.ligand_atom)) for h in find_hbonds(cx, mode="relaxed")}
    return _HB_CACHE[key]


def check_residue(item: Item) -> list[str]:
    r = item.meta["params"]["residue"]
    number = f"{r['number']}{r['insertion_code']}"
    truth = {(n, a, l) for c, num, n, a, l in engine_bonds(item.meta["source"], item.meta["ligand"])
             if c == r["chain"] and num == number and n == r["name"]}
    answer = item.q["answer"].strip()
    problems = []
    if answer == "No":
        got = set()
    elif answer.startswith("Yes: "):
        got = {(b.residue_name, b.residue_atom, b.ligand_atom) for b in parse_bond_list(answer[5:], strict=True)}
    else:
        return [f"answer {answer!r} is neither 'No' nor 'Yes: ...'"]
    if got != truth:
        problems.append(f"answer bonds {sorted(got)} != engine {sorted(truth)}")
    shown = f"{r['chain']}|{r['number']}|{r['insertion_code']}|{r['name']}"
    for name in item.meta["image_names"]:
        residues = set(item.get(name, "residue").tolist()) - {"ligand"}
        if residues != {shown}:
            problems.append(f"{name} shows residues {sorted(residues)}, expected only {shown}")
    return problems


def check_pocket(item: Item) -> list[str]:
    truth = engine_bonds(item.meta["source"], item.meta["ligand"])
    got = {(b.chain, b.residue_number, b.residue_name, b.residue_atom, b.ligand_atom)
           for b in parse_bond_list(item.q["answer"], strict=True)}
    return [] if got == truth else [f"answer bonds differ from the engine: missing {sorted(truth - got)}, extra {sorted(got - truth)}"]


def check_item(qpath: Path, tol: float = 1.0, hbonds: bool = True) -> list[str]:
    """Every problem found with one item (empty list: its answer key is right)."""
    item = Item(qpath)
    task = item.q["task"]
    problems = check_common(item)
    if task in (T.TRANSLATION, T.ROTATION, T.ZOOMING):
        problems += check_unit(item, tol)
    elif task in (T.TRANSLATION_ROTATION, T.ROTATION_ROTATION):
        problems += check_multistep(item, tol)
    elif task == T.DOCKING:
        problems += check_docking(item, tol)
    elif task == T.INTERACTION_LOCATION:
        problems += check_location(item, tol)
    elif task == T.RESIDUE_LIGAND and hbonds:
        problems += check_residue(item)
    elif task == T.POCKET_LIGAND and hbonds:
        problems += check_pocket(item)
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="output folder of misi-agent bench generate")
    ap.add_argument("--tolerance", type=float, default=1.0, help="pixels (default 1)")
    ap.add_argument("--no-hbonds", action="store_true", help="skip re-running the H-bond engine (T4, T9)")
    args = ap.parse_args(argv)
    paths = sorted(Path(args.out).glob("items/*/question.json"))
    if not paths:
        print(f"error: no items under {args.out}/items", file=sys.stderr)
        return 2
    ok, total = Counter(), Counter()
    failures = defaultdict(list)
    for p in paths:
        task = json.loads(p.read_text(encoding="utf-8"))["task"]
        total[task] += 1
        try:
            probs = check_item(p, args.tolerance, hbonds=not args.no_hbonds)
        except Exception as exc:  # a broken item is a failure, not a crash of the check
            probs = [f"{type(exc).__name__}: {exc}"]
        if probs:
            failures[task].append((p.parent.name, probs))
        else:
            ok[task] += 1
    for task in T.TASK_IDS:
        if total[task]:
            print(f"{task:28s} {ok[task]:5d} / {total[task]:5d} answer keys verified")
    for task, items in failures.items():
        for name, probs in items:
            for pr in probs:
                print(f"FAIL {name}: {pr}")
    n_ok, n = sum(ok.values()), sum(total.values())
    print(f"total {n_ok} / {n} verified")
    return 0 if n_ok == n else 1


if __name__ == "__main__":
    sys.exit(main())
