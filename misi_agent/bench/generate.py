"""``misi-agent bench generate``: regenerate MiSI-Bench items from real structures.

    misi-agent bench generate --structures /work/shared/data/structures/posebusters \\
        --out bench/test --tasks all --per-task 50 --split test --renderer raster --seed 0

What it writes under ``--out``::

    generation.json                 the arguments that define the item list (seed, tasks, ...)
    items/<id>/question.json        one question (images relative to this folder)
    items/<id>/NN_<image>.png       the images in prompt order
    items/<id>/atoms.npz            per image: view coordinates, screen positions, atom table
    shards/questions.shard-I-of-N.jsonl   one line per finished item of shard I
    questions.jsonl                 every item, in plan order (images relative to --out),
                                    written once all items of the plan are finished

The plan. ``--per-task N`` items of every task in ``--tasks``: item ``k`` of task ``t``.
Its complex is found by walking a seeded permutation of the pool (``--split`` of
``--structures``, see :mod:`misi_agent.bench.splits`) starting at position ``k``, so items
spread over the pool round-robin; a complex that cannot give the item (e.g. no H-bond)
is passed over for the next. All randomness of an item comes from
``numpy.random.default_rng([seed, task number, k, attempt])``: an item depends only on the
seed, the pool and its own (task, k), never on the order items are made in, so a run is
reproducible, sharded runs give the same items as one run and an interrupted run resumes
where it stopped.

Resume. An item is finished when its folder is complete and its line is in a shard file;
each item's files are written to a temporary folder and renamed, then its line appended
and flushed. A rerun with the same arguments skips finished items (a line cut short by an
interruption is dropped). A different seed/tasks/per-task/split/renderer/size/structures in
an existing output folder is an error (use another ``--out``).

Shards. ``--shard I/N`` (1 ≤ I ≤ N) makes the items whose plan position ``p`` has
``p % N == I - 1``; shards can run at the same time in the same ``--out``. Whichever run
finds every planned item finished (in any shard file) writes ``questions.jsonl``; rerunning
any shard, or the unsharded command, after all have finished just (re)writes it.

Bad arguments are reported in one line before anything is created.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
from tqdm import tqdm

from misi_agent.bench import tasks as T
from misi_agent.bench.items import ItemSpec, NotApplicable
from misi_agent.bench.splits import SPLIT_CHOICES, Entry, discover, select
from misi_agent.camera import Camera
from misi_agent.errors import MisiError
from misi_agent.render.base import RENDERERS, get_renderer
from misi_agent.structure import Complex, StructureError, load_complex

FORMAT_VERSION = 1
MIN_SIZE, MAX_SIZE = 64, 2048
RENDER_BATCH = 6  # items rendered per render_many call (one PyMOL round trip per batch)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _umask()


class GenerateError(MisiError):
    """Bad generation arguments or a pool that cannot give the requested items (one line)."""


@dataclass(frozen=True)
class Config:
    """The arguments that define the item list; stored in ``generation.json``."""

    structures: str
    tasks: tuple[str, ...]
    per_task: int
    split: str
    renderer: str
    seed: int
    size: int
    format_version: int = FORMAT_VERSION

    def to_json(self) -> dict:
        d = asdict(self)
        d["tasks"] = list(self.tasks)
        return d


@dataclass(frozen=True)
class PlanItem:
    task: str
    index: int


# ----------------------------------------------------------------------------- arguments


def parse_tasks(text: str) -> tuple[str, ...]:
    """``all`` or a comma-separated list of task ids (in the canonical order, no repeats)."""
    text = (text or "").strip()
    if text.lower() == "all":
        return T.TASK_IDS
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise GenerateError("no tasks given (expected 'all' or a comma-separated list of task ids)")
    for n in names:
        if n not in T.TASKS:
            raise GenerateError(f"unknown task {n!r} (expected 'all' or some of {', '.join(T.TASK_IDS)})")
    if len(set(names)) != len(names):
        raise GenerateError(f"task listed twice in {text!r}")
    return tuple(t for t in T.TASK_IDS if t in names)


def parse_shard(text: str | None) -> tuple[int, int]:
    """``"2/4"`` -> (2, 4); None -> (1, 1)."""
    if text is None:
        return 1, 1
    parts = str(text).strip().split("/")
    try:
        i, n = (int(p) for p in parts)
    except ValueError:
        raise GenerateError(f"bad --shard {text!r} (expected I/N, e.g. 1/4)") from None
    if n < 1 or not 1 <= i <= n:
        raise GenerateError(f"bad --shard {text!r} (need 1 <= I <= N)")
    return i, n


def _positive_int(text, what: str, low: int = 1, high: int | None = None) -> int:
    try:
        v = int(str(text).strip())
    except ValueError:
        raise GenerateError(f"{what} must be a whole number, got {text!r}") from None
    if v < low or (high is not None and v > high):
        rng = f"{low}..{high}" if high is not None else f">= {low}"
        raise GenerateError(f"{what} must be {rng}, got {v}")
    return v


# ----------------------------------------------------------------------------- plan


def plan(tasks: tuple[str, ...], per_task: int) -> list[PlanItem]:
    """Every item of a run, task by task."""
    return [PlanItem(t, k) for t in tasks for k in range(per_task)]


def shard_of(items: list[PlanItem], shard: tuple[int, int]) -> list[PlanItem]:
    """The items of shard ``I/N``: plan positions ``p`` with ``p % N == I - 1``."""
    i, n = shard
    return [it for p, it in enumerate(items) if p % n == i - 1]


def item_rng(seed: int, task: str, index: int, attempt: int) -> np.random.Generator:
    return np.random.default_rng([int(seed), T.TASKS[task].number, int(index), int(attempt)])


def permutation(seed: int, key: str, n: int) -> list[int]:
    """The seeded order in which a task (or the T4 positive / negative half) walks the pool."""
    number = T.TASKS[key].number if key in T.TASKS else 100 + T.COLUMNS.index(key)
    return [int(i) for i in np.random.default_rng([int(seed), number, 1_000_003]).permutation(n)]


def sequence_of(item: PlanItem) -> tuple[str, int]:
    """(eligibility key, rank): which list of eligible complexes an item takes from, and its place in it.

    T4 items alternate positive (even index) and negative (odd), each walking its own list so
    both halves spread over the pool.
    """
    if item.task == T.RESIDUE_LIGAND:
        return ("residue_ligand_pos" if item.index % 2 == 0 else "residue_ligand_neg"), item.index // 2
    return item.task, item.index


class ComplexPool:
    """The entries of one split with loaded complexes, their H-bonds and task eligibility cached.

    Eligibility is a pure function of a complex (it never depends on the seed or on other
    items): zooming needs room for a 40 Å zoom, interaction location and pocket–ligand need
    an H-bond, residue–ligand positives a residue with an H-bond and negatives one without.
    Walking only eligible complexes keeps items of a task on distinct complexes while the
    pool lasts.
    """

    def __init__(self, entries: list[Entry]):
        self.entries = entries
        self._cx: dict[int, Complex | None] = {}
        self._hb: dict[int, list] = {}
        self._ok: dict[tuple[str, int], bool] = {}
        self.failures: dict[str, str] = {}

    def complex(self, k: int) -> Complex | None:
        if k not in self._cx:
            e = self.entries[k]
            try:
                self._cx[k] = load_complex(e.path, e.ligand_code, pdb_id=e.pdb_id)
            except StructureError as exc:
                self._cx[k] = None
                self.failures[e.pdb_id] = str(exc)
        return self._cx[k]

    def hbonds(self, k: int) -> list:
        if k not in self._hb:
            from misi_agent.bench import task_hbonds

            self._hb[k] = task_hbonds.complex_hbonds(self.complex(k))
        return self._hb[k]

    def eligible(self, key: str, k: int) -> bool:
        if (key, k) not in self._ok:
            self._ok[(key, k)] = self.complex(k) is not None and self._eligible(key, k)
        return self._ok[(key, k)]

    def _eligible(self, key: str, k: int) -> bool:
        from misi_agent.bench import task_geometry as G
        from misi_agent.bench import task_hbonds as H

        if key == T.ZOOMING:
            return G.zoom_eligible(self.complex(k))
        if key in (T.INTERACTION_LOCATION, T.POCKET_LIGAND):
            return bool(self.hbonds(k))
        if key in ("residue_ligand_pos", "residue_ligand_neg"):
            return bool(H.residue_pool(self.complex(k), self.hbonds(k), key.endswith("pos"))[0])
        return True

    def candidates(self, seed: int, item: PlanItem) -> Iterator[int]:
        """Pool positions to try for an item, best first (lazily: complexes load when reached).

        The eligible complexes in the task's seeded permutation order form a list; the item
        takes place ``rank`` of it (modulo its length when the pool is shorter) and, should
        that complex still fail for this item's random values, goes on along the list.
        """
        key, rank = sequence_of(item)
        perm = permutation(seed, key, len(self.entries))
        seen = 0
        start = None
        for pos, k in enumerate(perm):
            if self.eligible(key, k):
                if seen == rank:
                    start = pos
                    break
                seen += 1
        if start is None:
            if seen == 0:
                return
            rank %= seen
            start = [p for p, k in enumerate(perm) if self.eligible(key, k)][rank]
        for pos in list(range(start, len(perm))) + list(range(start)):
            if self.eligible(key, perm[pos]):
                yield perm[pos]


def _generators() -> dict[str, Callable]:
    from misi_agent.bench import task_geometry as G
    from misi_agent.bench import task_hbonds as H

    return {
        T.TRANSLATION: lambda pool, k, rng, item, order: G.translation(pool.complex(k), rng),
        T.ROTATION: lambda pool, k, rng, item, order: G.rotation(pool.complex(k), rng),
        T.ZOOMING: lambda pool, k, rng, item, order: G.zooming(pool.complex(k), rng),
        T.RESIDUE_LIGAND: lambda pool, k, rng, item, order: H.residue_ligand(
            pool.complex(k), rng, positive=item.index % 2 == 0, hbonds=pool.hbonds(k)),
        T.TRANSLATION_ROTATION: lambda pool, k, rng, item, order: G.translation_rotation(
            pool.complex(k), _partner(pool, k, order), rng),  # order: the task's permutation
        T.ROTATION_ROTATION: lambda pool, k, rng, item, order: G.rotation_rotation(pool.complex(k), rng),
        T.DOCKING: lambda pool, k, rng, item, order: G.docking(pool.complex(k), rng),
        T.INTERACTION_LOCATION: lambda pool, k, rng, item, order: H.interaction_location(
            pool.complex(k), rng, hbonds=pool.hbonds(k)),
        T.POCKET_LIGAND: lambda pool, k, rng, item, order: H.pocket_ligand(
            pool.complex(k), rng, hbonds=pool.hbonds(k)),
    }


def _partner(pool: ComplexPool, k: int, order: list[int]) -> Complex:
    """The target complex of a translation + rotation item: the next loadable one after ``k``
    in the task's permutation with another PDB ID."""
    start = order.index(k)
    for j in order[start + 1:] + order[:start]:
        if pool.entries[j].pdb_id != pool.entries[k].pdb_id and pool.complex(j) is not None:
            return pool.complex(j)
    raise NotApplicable("no second complex in the pool")


def build_item(pool: ComplexPool, item: PlanItem, seed: int, generators=None) -> tuple[ItemSpec, Entry, int]:
    """The spec of one planned item, its entry and the attempt number that gave it."""
    generators = generators or _generators()
    order = permutation(seed, item.task, len(pool.entries))
    reasons = []
    for attempt, k in enumerate(pool.candidates(seed, item)):
        try:
            spec = generators[item.task](pool, k, item_rng(seed, item.task, item.index, attempt), item, order)
        except NotApplicable as exc:
            reasons.append(str(exc))
            continue
        return spec, pool.entries[k], attempt
    why = f" (e.g. {reasons[0]})" if reasons else ""
    raise GenerateError(f"no complex in the pool can give a {item.task} item{why}")


# ----------------------------------------------------------------------------- writing


def item_id(spec: ItemSpec, item: PlanItem) -> str:
    return f"{item.task}-{spec.pdb_id}-{item.index}"


def image_files(spec: ItemSpec) -> list[str]:
    return [f"{n:02d}_{img.name}.png" for n, img in enumerate(spec.images, start=1)]


def question_text(spec: ItemSpec) -> str:
    """The prompt from the project's fixed template of the task (misi_agent.bench.prompts)."""
    from misi_agent.bench import prompts

    return prompts.build_prompt(spec.task, options=_text_options(spec), **spec.prompt_params)


def _text_options(spec: ItemSpec) -> list[str] | None:
    return [spec.options[L] for L in T.CHOICE_LETTERS] if spec.task == T.INTERACTION_LOCATION else None


def _atoms_arrays(prefix: str, scene, screen: np.ndarray, visible: np.ndarray) -> dict[str, np.ndarray]:
    keys = scene.residue_keys
    res = np.array([f"{keys[r].chain}|{keys[r].number}|{keys[r].ins_code}|{keys[r].name}" if r >= 0 else "ligand"
                    for r in scene.residue])
    return {
        f"{prefix}/coords": scene.coords.astype(np.float64),
        f"{prefix}/screen": np.asarray(screen, np.float64),
        f"{prefix}/visible": np.asarray(visible, bool),
        f"{prefix}/atom_name": scene.atom_names.astype(str),
        f"{prefix}/element": scene.elements.astype(str),
        f"{prefix}/is_ligand": scene.is_ligand.astype(bool),
        f"{prefix}/residue": res,
    }


def write_item(out: Path, spec: ItemSpec, entry: Entry, item: PlanItem, renderings, cfg: Config,
               partner: Entry | None = None) -> dict:
    """Write one item's folder atomically; returns the questions.jsonl record (paths relative to ``out``)."""
    from misi_agent.bench.question import Question, write_question

    qid = item_id(spec, item)
    files = image_files(spec)
    items_dir = out / "items"
    tmp = Path(tempfile.mkdtemp(prefix=f".{qid}.", dir=items_dir))
    try:
        os.chmod(tmp, 0o777 & ~_UMASK)
        arrays: dict[str, np.ndarray] = {}
        for img, fname, rend in zip(spec.images, files, renderings):
            rend.save(tmp / fname)
            arrays.update(_atoms_arrays(img.name, img.scene, rend.screen, rend.visible))
        cam = Camera(cfg.size, cfg.size)
        for name, scene in spec.references.items():
            screen, depth = cam.project(scene.coords)
            arrays.update(_atoms_arrays(f"ref_{name}", scene, screen, cam.visible(scene.coords)))
        np.savez_compressed(tmp / "atoms.npz", **arrays)
        meta = {
            "pdb_id": spec.pdb_id,
            "ligand": spec.ligand_code,
            "split": entry.split,
            "pool": entry.pool,
            "source": str(entry.path),
            "renderer": cfg.renderer,
            "size": cfg.size,
            "seed": cfg.seed,
            "item_index": item.index,
            "image_names": [img.name for img in spec.images],
            "image_captions": [img.caption for img in spec.images],
            "references": sorted(spec.references),
            "atoms": "atoms.npz",
            "params": spec.params,
        }
        if spec.options is not None:
            meta["option_images" if spec.task != T.INTERACTION_LOCATION else "option_texts"] = spec.options
        if partner is not None:
            meta["target"] = {"pdb_id": partner.pdb_id, "split": partner.split, "pool": partner.pool,
                              "source": str(partner.path), "ligand": spec.params.get("target_ligand")}
        q = Question(id=qid, task=spec.task, question=question_text(spec), images=files, answer=spec.answer,
                     options=_text_options(spec), meta=meta)
        write_question(tmp / "question.json", q)
        os.chmod(tmp / "question.json", 0o666 & ~_UMASK)
        final = items_dir / qid
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    record = q.to_dict()
    record["images"] = [f"items/{qid}/{f}" for f in files]
    return record


# ----------------------------------------------------------------------------- shard files and merge


def shard_path(out: Path, shard: tuple[int, int]) -> Path:
    return out / "shards" / f"questions.shard-{shard[0]}-of-{shard[1]}.jsonl"


def _key(record: dict) -> tuple[str, int] | None:
    try:
        return record["task"], int(record["meta"]["item_index"])
    except (KeyError, TypeError, ValueError):
        return None


def read_finished(out: Path) -> dict[tuple[str, int], dict]:
    """Records of finished items across all shard files (item folder complete), by (task, index)."""
    done: dict[tuple[str, int], dict] = {}
    shard_dir = out / "shards"
    if not shard_dir.is_dir():
        return done
    for path in sorted(shard_dir.glob("questions.shard-*-of-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by an interruption
            key = _key(rec)
            if key is None:
                continue
            if (out / "items" / rec["id"] / "question.json").is_file():
                done[key] = rec
    return done


def _clean_shard_file(path: Path, out: Path) -> None:
    """Drop malformed lines and lines whose item folder is gone (after an interruption)."""
    if not path.is_file():
        return
    keep = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if _key(rec) is not None and (out / "items" / rec["id"] / "question.json").is_file():
            keep.append(line)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(k + "\n" for k in keep), encoding="utf-8")
    os.replace(tmp, path)


def merge(out: Path, items: list[PlanItem]) -> int | None:
    """Write ``questions.jsonl`` in plan order when every planned item is finished; returns the count."""
    done = read_finished(out)
    if any((it.task, it.index) not in done for it in items):
        return None
    text = "".join(json.dumps(done[(it.task, it.index)], ensure_ascii=False) + "\n" for it in items)
    fd, tmp = tempfile.mkstemp(prefix=".questions.", suffix=".tmp", dir=out)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, out / "questions.jsonl")
    return len(items)


# ----------------------------------------------------------------------------- output folder


def prepare_out(out: Path, cfg: Config) -> None:
    """Create ``out`` (or check that it holds the same generation) and write generation.json."""
    gen = out / "generation.json"
    if out.exists() and not out.is_dir():
        raise GenerateError(f"--out {out} exists and is not a folder")
    if gen.is_file():
        try:
            old = json.loads(gen.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, OSError):
            raise GenerateError(f"{gen} is unreadable; use another --out") from None
        if old != cfg.to_json():
            diff = sorted(k for k in set(old) | set(cfg.to_json()) if old.get(k) != cfg.to_json().get(k))
            raise GenerateError(f"--out {out} holds another generation (differs in {', '.join(diff)}); use another --out")
    elif out.is_dir() and any(not p.name.startswith(".generation.") for p in out.iterdir()):
        raise GenerateError(f"--out {out} is not empty and holds no generation.json; use another --out")
    if not gen.is_file():
        # generation.json first: a shard starting at the same moment then finds a generation, not a stray folder
        out.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".generation.", suffix=".tmp", dir=out)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(cfg.to_json(), fh, indent=2)
            fh.write("\n")
        os.replace(tmp, gen)
    (out / "items").mkdir(exist_ok=True)
    (out / "shards").mkdir(exist_ok=True)


# ----------------------------------------------------------------------------- run


def _make_items(out: Path, cfg: Config, pool: ComplexPool, todo: list[PlanItem], rend, spath: Path,
                task_seconds: dict[str, float], desc: str, progress: bool) -> int:
    """Build, render (``RENDER_BATCH`` items per ``render_many``) and write the items of ``todo``."""
    if not todo:
        return 0
    gens = _generators()
    entry_of = {e.pdb_id: e for e in pool.entries}
    made = 0
    with tqdm(total=len(todo), desc=desc, unit="item", disable=not progress, file=sys.stderr) as bar, \
            spath.open("a", encoding="utf-8") as fh:
        for start in range(0, len(todo), RENDER_BATCH):
            batch = todo[start:start + RENDER_BATCH]
            t_batch = time.perf_counter()
            specs = [build_item(pool, it, cfg.seed, gens) for it in batch]
            scenes = [img.scene for spec, _, _ in specs for img in spec.images]
            renderings = rend.render_many(scenes, cfg.size)
            per_image = (time.perf_counter() - t_batch) / max(1, len(scenes))
            pos = 0
            for it, (spec, entry, _) in zip(batch, specs):
                t_item = time.perf_counter()
                n = len(spec.images)
                partner = entry_of.get(spec.params.get("target_pdb_id")) if spec.extra_pdb_ids else None
                rec = write_item(out, spec, entry, it, renderings[pos:pos + n], cfg, partner)
                pos += n
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
                made += 1
                task_seconds[it.task] = task_seconds.get(it.task, 0.0) + time.perf_counter() - t_item + per_image * n
                bar.update(1)
    return made


@dataclass
class Summary:
    planned: int
    made: int
    skipped: int
    merged: int | None
    seconds: float
    failures: dict[str, str]
    task_seconds: dict[str, float]


def generate(structures: str | Path, out: str | Path, *, tasks: tuple[str, ...] = T.TASK_IDS, per_task: int = 50,
             split: str = "test", renderer: str = "raster", seed: int = 0, size: int = 512,
             shard: tuple[int, int] = (1, 1), progress: bool = True) -> Summary:
    """Generate (or resume) the items of one shard; see the module docstring."""
    t0 = time.perf_counter()
    if split not in SPLIT_CHOICES:
        raise GenerateError(f"unknown split {split!r} (expected one of {', '.join(SPLIT_CHOICES)})")
    if renderer not in RENDERERS:
        raise GenerateError(f"unknown renderer {renderer!r} (expected one of {', '.join(RENDERERS)})")
    entries = select(discover(structures), split)
    if not entries:
        raise GenerateError(f"{structures}: no entry in split {split!r}")
    cfg = Config(str(Path(structures).resolve()), tuple(tasks), int(per_task), split, renderer, int(seed), int(size))
    out = Path(out)
    all_items = plan(cfg.tasks, cfg.per_task)
    rend = get_renderer(renderer)  # before anything is written: an unusable backend is a bad argument
    prepare_out(out, cfg)
    mine = shard_of(all_items, shard)
    spath = shard_path(out, shard)
    _clean_shard_file(spath, out)
    done = read_finished(out)
    todo = [it for it in mine if (it.task, it.index) not in done]
    pool = ComplexPool(entries)
    task_seconds: dict[str, float] = {}
    try:
        made = _make_items(out, cfg, pool, todo, rend, spath, task_seconds,
                           desc=f"bench generate {shard[0]}/{shard[1]}", progress=progress)
    finally:
        close = getattr(rend, "close", None)
        if callable(close):
            close()
    merged = merge(out, all_items)
    return Summary(planned=len(mine), made=made, skipped=len(mine) - len(todo), merged=merged,
                   seconds=time.perf_counter() - t0, failures=pool.failures, task_seconds=task_seconds)


# ----------------------------------------------------------------------------- CLI


def register_generate(bench_subparsers) -> None:
    """Add ``generate`` to the ``misi-agent bench`` sub-commands."""
    p = bench_subparsers.add_parser(
        "generate", help="generate benchmark items (images + questions) from structures",
        description=__doc__.splitlines()[0])
    p.add_argument("--structures", required=True,
                   help="folder with manifest.csv (pdb_id, ligand_ccd, file) or plain structure files, "
                        "or a folder of such folders")
    p.add_argument("--out", required=True, help="output folder (created; resumable)")
    p.add_argument("--tasks", default="all", help="'all' or comma-separated task ids (default all)")
    p.add_argument("--per-task", default="50", help="items per task (default 50)")
    p.add_argument("--split", default="test", help=f"one of {', '.join(SPLIT_CHOICES)} (default test)")
    p.add_argument("--renderer", default="raster", help=f"one of {', '.join(RENDERERS)} (default raster)")
    p.add_argument("--seed", default="0", help="random seed (default 0)")
    p.add_argument("--size", default="512", help=f"image size in pixels ({MIN_SIZE}-{MAX_SIZE}, default 512)")
    p.add_argument("--shard", default=None, help="I/N: make only shard I of N (1-based); shards merge by themselves")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    tasks = parse_tasks(args.tasks)
    per_task = _positive_int(args.per_task, "--per-task", 1, 100_000)
    seed = _positive_int(args.seed, "--seed", 0, 2**63 - 1)
    size = _positive_int(args.size, "--size", MIN_SIZE, MAX_SIZE)
    shard = parse_shard(args.shard)
    s = generate(args.structures, args.out, tasks=tasks, per_task=per_task, split=args.split, renderer=args.renderer,
                 seed=seed, size=size, shard=shard, progress=not args.no_progress)
    msg = f"{s.made} item(s) made, {s.skipped} already finished, shard {shard[0]}/{shard[1]} in {s.seconds:.1f} s"
    if s.merged is not None:
        msg += f"; {Path(args.out) / 'questions.jsonl'}: {s.merged} questions"
    else:
        msg += "; questions.jsonl is written when all shards have finished"
    for pid, why in sorted(s.failures.items()):
        print(f"warning: {pid} skipped: {why}", file=sys.stderr)
    print(msg)
    return 0
