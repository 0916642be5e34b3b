"""PyMOL backend: ray-traced images of a :class:`~misi_agent.scene.Scene` with our camera.

Why a separate process: PyMOL must not share a process with Open Babel (PLIP) — PNG
writing then fails silently — and its global state must not leak into the caller. So
:class:`PyMOLRenderer` starts ``python -m misi_agent.render.pymol_backend`` once, sends it
one job per image (a JSON line naming an ``.npz`` with the scene's arrays and the output
PNG) and reads one JSON reply line. A batch (``render_many``) pays the start-up once.

Camera: the scene's coordinates are already view coordinates (camera at the origin,
looking down −z), so the molecule is loaded with exactly those coordinates and PyMOL's
view is set to the identity: rotation ``I``, origin of rotation ``o`` (on the line of
sight, between the clipping planes) and camera-space position of that origin also ``o``, hence
``camera = I·(model − o) + o = model``. PyMOL's ``field_of_view`` is the *vertical*
angle (its ray tracer uses ``height = |z| tan(fov/2)``, ``width = height · aspect``), so
it is set to ``2 atan(tan(15°) · h/w)``: the horizontal field of view is 30° like
:class:`~misi_agent.camera.Camera`. Measured blob centres of isolated atoms agree with
:func:`~misi_agent.render.base.project_scene` to within 0.1 px with flat lighting and
0.4 px with PyMOL's lighting (tests/test_render_pymol.py asserts 2 px).

Look: PyMOL's own lighting, with our colour classes (``Scene.colors``; PyMOL keeps the
atom order, ``retain_order``, and the worker checks every atom's colour), sticks for the
pocket, ball-and-stick for the ligand (ball radius ``ATOM_RADIUS_LIGAND``), black
background, depth cue over the scene's own depth range. Labels as in the raster renderer:
``ARG 45`` at each residue's CA (light yellow) and the atom name just above each ligand
atom (light cyan). Ray-traced labels would be hidden by sticks (``float_labels`` only
works in OpenGL), so they are traced in a second pass on a transparent background and
composited on top with a 1-px black halo.
"""
from __future__ import annotations

import json
import math
import os
import select
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Sequence

import numpy as np
from PIL import Image

from misi_agent.camera import FOV_DEG, NEAR, Camera
from misi_agent.errors import MisiError
from misi_agent.render.base import ATOM_RADIUS_LIGAND, BACKGROUND, STICK_RADIUS, Rendering, project_scene
from misi_agent.scene import HEX, Scene, hex_to_rgb

STARTUP_TIMEOUT_S = 60.0  # seconds for the worker to import PyMOL and say it is ready
RENDER_TIMEOUT_S = 120.0  # seconds for one image
SLAB_MARGIN = 3.0  # Å between the nearest/farthest atom and the front/rear clipping plane
LABEL_SIZE = 12  # label font size in pixels (viewport == image size, so no rescaling)
LABEL_LIFT = 0.7  # Å: ligand atom names sit this far above their atom so the ball stays visible
LIGAND_STICK_RADIUS = 0.11  # Å, thinner than the pocket's sticks so the balls stand out (as in raster.py)
RESIDUE_LABEL_COLOR = (255, 250, 200)  # light yellow ``ARG 45`` (same scheme as raster.py)
LIGAND_LABEL_COLOR = (150, 235, 255)  # light cyan ligand atom names
LABEL_OBJECTS = {False: "labels_residues", True: "labels_ligand"}  # PyMOL objects holding the label pseudoatoms
_REPLY = "@@MISI "  # prefix of the worker's protocol lines on its private pipe


class PyMOLError(MisiError):
    """PyMOL failed, timed out or produced an empty image (one-line message)."""


# --------------------------------------------------------------------------- parent side


def vertical_fov(width: int, height: int, horizontal_deg: float = FOV_DEG) -> float:
    """PyMOL's (vertical) ``field_of_view`` giving ``horizontal_deg`` across ``width`` pixels."""
    return math.degrees(2.0 * math.atan(math.tan(math.radians(horizontal_deg) / 2.0) * height / width))


def _image_size(size: int | tuple[int, int]) -> tuple[int, int]:
    """``512`` or ``(640, 400)`` -> (width, height), checked."""
    try:
        w, h = (size, size) if isinstance(size, (int, np.integer)) else (int(size[0]), int(size[1]))
    except (TypeError, ValueError, IndexError):
        raise PyMOLError(f"bad image size {size!r} (expected an integer or (width, height))") from None
    if not (8 <= w <= 8192 and 8 <= h <= 8192):
        raise PyMOLError(f"image size {w}x{h} out of range (8..8192 pixels)")
    return int(w), int(h)


def scene_payload(scene: Scene, width: int, height: int, labels: bool = True) -> dict[str, np.ndarray]:
    """Everything the worker needs, as plain numpy arrays (no pickles cross the pipe).

    Colours are the scene's colour classes (``Scene.color_classes``) with their exact RGB;
    the view, slab and field of view are derived here so the worker only executes them.
    """
    n = len(scene)
    if n == 0:
        raise PyMOLError("cannot render an empty scene (no atoms)")
    coords = np.asarray(scene.coords, float)
    if not np.all(np.isfinite(coords)):
        raise PyMOLError("scene coordinates contain NaN or infinity")
    classes = scene.color_classes()
    palette_names = sorted(set(classes))
    class_index = np.array([palette_names.index(c) for c in classes], dtype=np.int32)
    palette = np.array([hex_to_rgb(HEX[c]) for c in palette_names], dtype=float) / 255.0
    resn, resi, chain = [], [], []
    for lig, r in zip(scene.is_ligand, scene.residue):
        if lig or r < 0:
            resn.append(scene.ligand_code or "LIG")
            resi.append("1")
            chain.append("L")
        else:
            key = scene.residue_keys[int(r)]
            resn.append(key.name)
            resi.append(f"{key.number}{key.ins_code}")
            chain.append(key.chain or "A")
    depth = -coords[:, 2]
    front = max(NEAR, float(depth.min()) - SLAB_MARGIN)
    back = max(front + 1.0, float(depth.max()) + SLAB_MARGIN)
    # origin of rotation on the line of sight, between the clipping planes: PyMOL sizes the
    # ray-traced frustum from |origin z| and breaks if that is 0 or nearer than the front plane
    origin = np.array([0.0, 0.0, -0.5 * (front + back)])
    fov = vertical_fov(width, height)
    view = np.array([1, 0, 0, 0, 1, 0, 0, 0, 1, *origin, *origin, front, back, -fov], dtype=float)
    if labels:
        lab = scene.labels()
        label_text = np.array([t for t, _ in lab], dtype=str)
        label_is_ligand = np.arange(len(lab)) >= len(lab) - int(np.sum(scene.is_ligand))  # ligand labels come last
        label_pos = np.array([p for _, p in lab], dtype=float).reshape(-1, 3)
        label_pos[label_is_ligand, 1] += LABEL_LIFT
    else:
        label_text, label_pos, label_is_ligand = np.zeros(0, dtype=str), np.zeros((0, 3)), np.zeros(0, bool)
    return {
        "coords": coords,
        "symbols": np.array([e.capitalize() for e in scene.elements], dtype=str),
        "names": np.asarray(scene.atom_names, dtype=str),
        "resn": np.array(resn, dtype=str),
        "resi": np.array(resi, dtype=str),
        "chain": np.array(chain, dtype=str),
        "is_ligand": np.asarray(scene.is_ligand, bool),
        "class_index": class_index,
        "palette": palette,
        "bonds": np.asarray(scene.bonds, dtype=np.int64).reshape(-1, 2),
        "bond_orders": np.asarray(scene.bond_orders, dtype=np.int64),
        "label_text": label_text,
        "label_pos": label_pos,
        "label_is_ligand": label_is_ligand,
        "view": view,
        "fov": np.array(fov),
        "size": np.array([width, height], dtype=np.int64),
    }


class _Worker:
    """One PyMOL process speaking JSON lines: ``{"npz", "png"}`` in, ``{"ok", "error"}`` out."""

    def __init__(self, startup_timeout: float = STARTUP_TIMEOUT_S):
        self._log = tempfile.TemporaryFile(mode="w+b")
        read_fd, write_fd = os.pipe()
        env = dict(os.environ)
        env.setdefault("PYTHONHASHSEED", "0")
        env["MISI_PYMOL_REPLY_FD"] = str(write_fd)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "misi_agent.render.pymol_backend", "--worker"],
            stdin=subprocess.PIPE, stdout=self._log, stderr=self._log,
            pass_fds=(write_fd,), env=env, close_fds=True,
        )
        os.close(write_fd)
        self._reply_fd = read_fd
        self._buffer = b""
        self._finalizer = weakref.finalize(self, _shutdown, self.proc, read_fd, self._log)
        hello = self._read_reply(startup_timeout, "starting PyMOL")
        if not hello.get("ok"):
            self.close()
            raise PyMOLError(f"PyMOL worker failed to start: {hello.get('error', 'unknown error')}")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _log_tail(self) -> str:
        try:
            self._log.seek(0)
            text = self._log.read().decode("utf-8", "replace").strip().splitlines()
        except (OSError, ValueError):
            return ""
        return (" | " + " ".join(text[-3:])[-300:]) if text else ""

    def _read_reply(self, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.proc.kill()  # it may be stuck inside PyMOL: no graceful goodbye
                self.close()
                raise PyMOLError(f"PyMOL worker timed out after {timeout:g} s while {what}")
            ready, _, _ = select.select([self._reply_fd], [], [], min(left, 1.0))
            if not ready:
                if not self.alive():
                    tail = self._log_tail()
                    self.close()
                    raise PyMOLError(f"PyMOL worker exited while {what}{tail}")
                continue
            chunk = os.read(self._reply_fd, 65536)
            if not chunk:
                tail = self._log_tail()
                self.close()
                raise PyMOLError(f"PyMOL worker exited while {what}{tail}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        text = line.decode("utf-8", "replace")
        if not text.startswith(_REPLY):
            self.proc.kill()
            self.close()
            raise PyMOLError(f"PyMOL worker sent a malformed reply while {what}")
        return json.loads(text[len(_REPLY):])

    def job(self, npz: Path, png: Path, timeout: float) -> None:
        if not self.alive():
            raise PyMOLError("PyMOL worker is not running")
        try:
            self.proc.stdin.write((json.dumps({"npz": str(npz), "png": str(png)}) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            tail = self._log_tail()
            self.close()
            raise PyMOLError(f"PyMOL worker is gone ({exc.__class__.__name__}){tail}") from None
        reply = self._read_reply(timeout, f"rendering {png.name}")
        if not reply.get("ok"):
            raise PyMOLError(f"PyMOL failed: {reply.get('error', 'unknown error')}")

    def close(self) -> None:
        self._finalizer()


def _shutdown(proc: subprocess.Popen, reply_fd: int, log) -> None:
    """Ask the worker to quit (EOF on stdin), then kill it if it does not; release the pipes."""
    try:
        if proc.poll() is None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        elif proc.stdin and not proc.stdin.closed:
            proc.stdin.close()
    finally:
        for close in (lambda: os.close(reply_fd), log.close):
            try:
                close()
            except OSError:
                pass


def _check_image(path: Path, width: int, height: int, expect_content: bool) -> Image.Image:
    """Load the worker's PNG, insisting on the right size and, when atoms are visible, some content."""
    if not path.is_file() or path.stat().st_size == 0:
        raise PyMOLError("PyMOL wrote no image")
    try:
        with Image.open(path) as im:
            image = im.convert("RGB")
    except OSError as exc:
        raise PyMOLError(f"PyMOL wrote an unreadable image ({exc})") from None
    if image.size != (width, height):
        raise PyMOLError(f"PyMOL wrote a {image.size[0]}x{image.size[1]} image, expected {width}x{height}")
    if expect_content:
        arr = np.asarray(image, dtype=np.int16)
        if int(np.abs(arr - np.array(BACKGROUND, dtype=np.int16)).max()) <= 8:
            raise PyMOLError("PyMOL produced an empty (background-only) image")
    return image


class PyMOLRenderer:
    """Ray-traced PyMOL images with the same camera as :func:`~misi_agent.render.base.project_scene`.

    The worker process starts on first use and is reused until :meth:`close` (or the
    ``with`` block ends, or the renderer is garbage-collected). ``labels=False`` drops
    residue and atom-name labels (used to measure atom positions in the pixels).
    """

    name = "pymol"

    def __init__(self, labels: bool = True, timeout: float = RENDER_TIMEOUT_S):
        self.labels = labels
        self.timeout = float(timeout)
        self._worker: _Worker | None = None

    def __enter__(self) -> "PyMOLRenderer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker process (a later render starts a new one)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def _ensure_worker(self) -> _Worker:
        if self._worker is None or not self._worker.alive():
            self._worker = _Worker()
        return self._worker

    def render(self, scene: Scene, size: int | tuple[int, int] = 512) -> Rendering:
        """One ray-traced image; ``size`` is the square side (or ``(width, height)``)."""
        return self.render_many([scene], size)[0]

    def render_many(self, scenes: Sequence[Scene], size: int | tuple[int, int] = 512) -> list[Rendering]:
        """Ray-trace every scene in one worker; the images are checked before anything is returned."""
        width, height = _image_size(size)
        camera = Camera(width, height)
        payloads = [scene_payload(s, width, height, self.labels) for s in scenes]
        out = []
        with tempfile.TemporaryDirectory(prefix="misi_pymol_") as tmp:
            for k, (scene, payload) in enumerate(zip(scenes, payloads)):
                npz, png = Path(tmp) / f"scene{k}.npz", Path(tmp) / f"scene{k}.png"
                np.savez(npz, **payload)
                self._ensure_worker().job(npz, png, self.timeout)
                screen, depth, radius, visible = project_scene(scene, camera)
                image = _check_image(png, width, height, expect_content=bool(visible.any()))
                out.append(Rendering(image=image, screen=screen, depth=depth, radius_px=radius,
                                     visible=visible, renderer=self.name))
        return out


# --------------------------------------------------------------------------- worker side


def _setup_look(cmd, payload: dict) -> None:
    """Deterministic global settings: black opaque background, PyMOL lighting, depth cue, labels."""
    width, height = (int(v) for v in payload["size"])
    cmd.viewport(width, height)  # labels are sized against the viewport: keep scale 1
    cmd.set("auto_zoom", 0)
    cmd.bg_color("black")
    cmd.set("ray_opaque_background", 1)
    cmd.set("orthoscopic", 0)
    cmd.set("field_of_view", float(payload["fov"]))
    cmd.set("depth_cue", 1)
    cmd.set("fog_start", 0.35)
    cmd.set("fog", 0.75)
    cmd.set("antialias", 1)
    cmd.set("ray_trace_mode", 0)
    cmd.set("ray_shadow", 0)
    cmd.set("specular", 0.25)
    cmd.set("valence", 1)
    cmd.set("valence_mode", 1)
    cmd.set("stick_radius", STICK_RADIUS)
    cmd.set("stick_ball", 0)
    cmd.set("sphere_scale", 1.0)
    cmd.set("sphere_mode", 9)
    cmd.set("label_size", LABEL_SIZE)
    cmd.set("label_font_id", 7)  # DejaVu Sans Bold
    cmd.set_color("misi_residue_label", [c / 255.0 for c in RESIDUE_LABEL_COLOR])
    cmd.set_color("misi_ligand_label", [c / 255.0 for c in LIGAND_LABEL_COLOR])
    cmd.set("label_color", "misi_residue_label")
    cmd.set("label_outline_color", "black")
    cmd.set("ray_label_specular", 0)
    cmd.set("label_position", (0.0, 0.0, 0.0))  # anchors are placed by scene_payload


def _load_scene(cmd, payload: dict) -> None:
    """The molecule with explicit bonds (no guessed connectivity), coloured by class, plus labels."""
    from chempy import Atom, Bond, models

    model = models.Indexed()
    coords = payload["coords"]
    for i in range(coords.shape[0]):
        a = Atom()
        a.coord = [float(x) for x in coords[i]]
        a.symbol = str(payload["symbols"][i])
        a.name = str(payload["names"][i])
        a.resn = str(payload["resn"][i])
        a.resi = str(payload["resi"][i])
        a.chain = str(payload["chain"][i])
        a.hetatm = int(bool(payload["is_ligand"][i]))
        a.vdw = ATOM_RADIUS_LIGAND  # ball radius with sphere_scale 1
        a.flags = 0
        model.add_atom(a)
    for (i, j), order in zip(payload["bonds"], payload["bond_orders"]):
        b = Bond()
        b.index = [int(i), int(j)]
        b.order = int(order)
        model.add_bond(b)
    cmd.set("retain_order", 1)
    cmd.load_model(model, "scene")
    cmd.hide("everything")
    for k, rgb in enumerate(payload["palette"]):
        cmd.set_color(f"misi_{k}", [float(x) for x in rgb])
    # retain_order keeps PyMOL's atom index == model order (index is 1-based); checked below
    wanted = [cmd.get_color_index(f"misi_{k}") for k in payload["class_index"]]
    cmd.alter("scene", "color = wanted[index - 1]", space={"wanted": wanted})
    cmd.recolor()
    got: list = []
    cmd.iterate("scene", "got.append((name, color))", space={"got": got})
    if [g[1] for g in got] != wanted or [g[0] for g in got] != [str(n) for n in payload["names"]]:
        raise RuntimeError("PyMOL reordered the atoms; colours would be misassigned")
    cmd.show("sticks", "scene")
    cmd.show("spheres", "scene and hetatm")
    cmd.set("stick_radius", LIGAND_STICK_RADIUS, "scene and hetatm")
    for k, (text, pos, lig) in enumerate(zip(payload["label_text"], payload["label_pos"], payload["label_is_ligand"])):
        cmd.pseudoatom(LABEL_OBJECTS[bool(lig)], pos=[float(x) for x in pos], label=str(text), name=f"L{k}")
    for lig, obj in LABEL_OBJECTS.items():
        if obj in cmd.get_names("objects"):
            cmd.hide("everything", obj)
            cmd.show("labels", obj)
            cmd.set("label_color", "misi_ligand_label" if lig else "misi_residue_label", obj)


def _render_job(cmd, npz: str, png: str) -> None:
    """Ray-trace the molecule, then the labels alone on a transparent background, and put the labels on top.

    Two passes because PyMOL's ``float_labels`` only works in OpenGL: ray-traced labels are
    3D objects that sticks would hide. Compositing keeps every label readable (as in ChimeraX).
    """
    from PIL import Image as PILImage, ImageFilter

    with np.load(npz, allow_pickle=False) as data:
        payload = {k: data[k] for k in data.files}
    cmd.reinitialize()
    _setup_look(cmd, payload)
    _load_scene(cmd, payload)
    cmd.set_view([float(v) for v in payload["view"]])
    width, height = (int(v) for v in payload["size"])
    mol_png, lab_png = png + ".mol.png", png + ".lab.png"
    label_objects = [o for o in LABEL_OBJECTS.values() if o in cmd.get_names("objects")]
    has_labels = bool(label_objects)
    for obj in label_objects:
        cmd.disable(obj)
    cmd.png(mol_png, width=width, height=height, ray=1, quiet=1)
    if not os.path.isfile(mol_png) or os.path.getsize(mol_png) == 0:
        raise RuntimeError("cmd.png wrote nothing")
    with PILImage.open(mol_png) as im:
        image = im.convert("RGBA")
    if has_labels:
        cmd.disable("scene")
        for obj in label_objects:
            cmd.enable(obj)
        cmd.set("depth_cue", 0)
        cmd.set("ray_opaque_background", 0)
        cmd.png(lab_png, width=width, height=height, ray=1, quiet=1)
        if not os.path.isfile(lab_png) or os.path.getsize(lab_png) == 0:
            raise RuntimeError("cmd.png wrote no label layer")
        with PILImage.open(lab_png) as im:
            text = im.convert("RGBA")
        # PyMOL's ray-traced text has no outline: a 1-px black halo (dilated alpha) keeps it readable over sticks
        halo = PILImage.new("RGBA", text.size, (0, 0, 0, 0))
        halo.putalpha(text.getchannel("A").filter(ImageFilter.MaxFilter(3)))
        image = PILImage.alpha_composite(PILImage.alpha_composite(image, halo), text)
    tmp = png + ".part.png"
    image.convert("RGB").save(tmp, format="PNG")
    os.replace(tmp, png)
    for path in (mol_png, lab_png):
        if os.path.exists(path):
            os.remove(path)


def _worker_main() -> int:
    """Read job lines on stdin until EOF; reply on the private pipe (PyMOL's own output goes to the log)."""
    reply = os.fdopen(int(os.environ["MISI_PYMOL_REPLY_FD"]), "w", buffering=1)

    def send(obj: dict) -> None:
        reply.write(_REPLY + json.dumps(obj) + "\n")
        reply.flush()

    try:
        import pymol

        pymol.finish_launching(["pymol", "-qc"])
        from pymol import cmd

        cmd.feedback("disable", "all", "everything")
    except Exception as exc:  # report, do not crash silently
        send({"ok": False, "error": f"{exc.__class__.__name__}: {exc}".splitlines()[0]})
        return 1
    send({"ok": True, "version": cmd.get_version()[0]})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
            _render_job(cmd, job["npz"], job["png"])
            send({"ok": True})
        except Exception as exc:  # one bad job must not kill the batch
            send({"ok": False, "error": (f"{exc.__class__.__name__}: {exc}".splitlines() or ["error"])[0]})
    return 0


if __name__ == "__main__" and "--worker" in sys.argv[1:]:
    sys.exit(_worker_main())
