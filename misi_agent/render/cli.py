"""``misi-agent render``: draw a complex in some views, plus every atom's screen position.

    misi-agent render 6yqw.cif.gz --out renders/ --ligand 82I --views front,left \\
        --command "roll y 30, move x 2" --size 512 --renderer raster

writes ``front.png``, ``left.png`` … (the commands applied after each view) and
``atoms.json``: per view, per atom, index, element, atom name, residue label (``ARG 45``,
or ``ligand``), chain, residue number, insertion code, screen x, y (pixels, origin top
left), depth (Å) and visibility, from the same projection the renderer used.

Every input is checked before anything is written; the files are rendered into a
temporary folder beside the output folder and moved in at the end, so a bad input leaves
no partial output.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path

from misi_agent.camera import VIEW_NAMES, format_commands, parse_commands
from misi_agent.errors import MisiError
from misi_agent.render.base import RENDERERS, Rendering, get_renderer
from misi_agent.scene import Scene

MIN_SIZE, MAX_SIZE = 64, 4096
_CCD_RE = re.compile(r"^[A-Za-z0-9]{1,5}$")


def register(subparsers) -> None:
    p = subparsers.add_parser("render", help="render a protein-ligand complex in one or more views",
                              description=__doc__.splitlines()[0])
    p.add_argument("structure", help="mmCIF or PDB entry (optionally .gz)")
    p.add_argument("--out", required=True, help="output folder (created; existing files of the same name are replaced)")
    p.add_argument("--ligand", default=None, help="CCD code of the ligand (default: the largest organic group)")
    p.add_argument("--renderer", default="raster", help=f"one of {', '.join(RENDERERS)} (default raster)")
    p.add_argument("--views", default=",".join(VIEW_NAMES), help="comma-separated views (default: all six)")
    p.add_argument("--command", default=None, help='commands applied after each view, e.g. "roll y 30, move x 2"')
    p.add_argument("--size", default="512", help=f"image width and height in pixels ({MIN_SIZE}-{MAX_SIZE}, default 512)")
    p.set_defaults(func=run)


def parse_views(text: str) -> list[str]:
    """``"front, left"`` -> ``["front", "left"]``; unknown or repeated views are errors."""
    views = [v.strip().lower() for v in str(text).split(",") if v.strip()]
    if not views:
        raise MisiError("no views given (expected some of " + ", ".join(VIEW_NAMES) + ")")
    for v in views:
        if v not in VIEW_NAMES:
            raise MisiError(f"unknown view {v!r} (expected some of {', '.join(VIEW_NAMES)})")
    if len(set(views)) != len(views):
        raise MisiError(f"view listed twice in {text!r}")
    return views


def parse_size(text: str) -> int:
    try:
        size = int(str(text).strip())
    except ValueError:
        raise MisiError(f"bad size {text!r} (expected an integer from {MIN_SIZE} to {MAX_SIZE})") from None
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise MisiError(f"bad size {size} (expected an integer from {MIN_SIZE} to {MAX_SIZE})")
    return size


def parse_ligand_code(text: str | None) -> str | None:
    if text is None:
        return None
    if not _CCD_RE.match(text.strip()):
        raise MisiError(f"bad ligand code {text!r} (expected a CCD code of 1-5 letters or digits)")
    return text.strip().upper()


def _num(v: float) -> float | None:
    v = float(v)
    return round(v, 3) if math.isfinite(v) else None


def atom_records(scene: Scene, rendering: Rendering, ligand_key) -> list[dict]:
    """One JSON-ready record per scene atom: identity, screen position, depth, visibility."""
    out = []
    for i in range(len(scene)):
        if scene.is_ligand[i]:
            label, key = "ligand", ligand_key
        else:
            key = scene.residue_keys[int(scene.residue[i])]
            label = key.label()
        out.append({
            "index": i,
            "element": str(scene.elements[i]),
            "atom_name": str(scene.atom_names[i]),
            "residue": label,
            "chain": key.chain,
            "res_number": int(key.number),
            "ins_code": key.ins_code,
            "x": _num(rendering.screen[i, 0]),
            "y": _num(rendering.screen[i, 1]),
            "depth": _num(rendering.depth[i]),
            "visible": bool(rendering.visible[i]),
        })
    return out


def run(args: argparse.Namespace) -> int:
    # 1. Check every argument before touching the disk.
    structure = Path(args.structure)
    if not structure.is_file():
        raise MisiError(f"{structure}: no such file")
    size = parse_size(args.size)
    views = parse_views(args.views)
    commands = parse_commands(args.command) if args.command is not None else []
    ligand = parse_ligand_code(args.ligand)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise MisiError(f"{out}: exists and is not a folder")
    if args.renderer not in RENDERERS:
        raise MisiError(f"unknown renderer {args.renderer!r} (expected one of {', '.join(RENDERERS)})")
    try:
        renderer = get_renderer(args.renderer)
    except ImportError as exc:
        raise MisiError(f"renderer {args.renderer!r} is not available ({str(exc).splitlines()[0]})") from None

    # 2. Load and render everything in memory.
    from misi_agent.structure import load_complex
    from misi_agent.scene import scene_from_complex

    cx = load_complex(structure, ligand)
    scenes = [scene_from_complex(cx, v) for v in views]
    if commands:
        scenes = [s.apply(commands) for s in scenes]
    renderings = renderer.render_many(scenes, size)
    record = {
        "structure": str(structure),
        "pdb_id": cx.pdb_id,
        "ligand": cx.ligand_code,
        "ligand_chain": cx.ligand_key.chain,
        "ligand_res_number": cx.ligand_key.number,
        "renderer": renderer.name,
        "size": size,
        "commands": format_commands(commands),
        "views": {
            v: {"image": f"{v}.png", "atoms": atom_records(s, r, cx.ligand_key)}
            for v, s, r in zip(views, scenes, renderings)
        },
    }

    # 3. Write into a temporary folder beside the output, then move the files in.
    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=parent))
    try:
        names = []
        for v, r in zip(views, renderings):
            r.save(tmp / f"{v}.png")
            names.append(f"{v}.png")
        (tmp / "atoms.json").write_text(json.dumps(record, indent=1) + "\n")
        names.append("atoms.json")
        out.mkdir(exist_ok=True)
        for name in names:
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {len(views)} view(s) and atoms.json to {out}")
    return 0
