"""Fine-tune a Qwen2.5-VL-architecture model on the generated training split, in two flavours.

    python eval/finetune.py --config eval/configs/finetune_tiny.yaml --flavour direct
    python eval/finetune.py --config eval/configs/finetune_tiny.yaml --flavour tools

Flavours:

* ``direct``: the paper's SFT. Each sample is the question with its images and the gold
  answer as the assistant's reply; no tools in the prompt.
* ``tools``: a planner that calls tools. Samples are router traces
  (:mod:`eval.distill_traces`): the tool specs in the system turn, the question, the
  assistant's ``<tool_call>`` (arguments copied from the question), the tool's result, the
  final answer; all rendered with the shipped tool template
  (``misi_agent/agent/templates/qwen2_5_vl_tools.jinja``), which the ``transformers:PATH``
  planner uses for Qwen2.5-VL checkpoints.

The loss covers the assistant turns only (every token from after ``<|im_start|>assistant\\n``
up to and including ``<|im_end|>``).

Models (``model.base`` in the config):

* ``tiny``: a model built from the sizes in ``model.tiny`` (:mod:`misi_agent.agent.tiny_model`),
  with a byte-level BPE tokenizer trained here on the training transcripts, trained from
  scratch; this is what runs on a CPU machine in minutes;
* a local checkpoint folder (e.g. Qwen2.5-VL-7B-Instruct): loaded from safetensors only,
  fine-tuned in full or, with ``model.lora``, with LoRA adapters through ``peft`` (merged
  into the weights before saving). ``peft`` is optional: without it a LoRA config stops
  with a one-line message.

Output folder: ``model.safetensors`` (+ config), tokenizer, image processor (pixel limits
of training), ``chat_template.jinja``, ``training_log.json`` (time, peak memory, losses,
data counts, the config) and ``loss.png``. The folder loads with
``--planner transformers:FOLDER``. Seeds are fixed (Python, NumPy, torch, data order).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import resource
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from distill_traces import (REPO, CallCache, EvalError, SetSpec, Transcript, distill, ensure_question_set,  # noqa: E402
                            load_yaml, read_transcripts, resolve, write_text_atomic)

from misi_agent.errors import MisiError  # noqa: E402

FLAVOURS = ("direct", "tools")
AUGMENTATIONS = ("pdb_ids", "residue_numbers")
_SPECIAL_RE = re.compile(r"<\|[a-z_]+\|>")


# ----------------------------------------------------------------------------- config


@dataclass
class TrainSettings:
    """Optimisation settings (``training:`` in the config)."""

    epochs: float = 4.0
    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 10
    weight_decay: float = 0.0
    grad_accum: int = 1
    max_length: int = 2048
    max_grad_norm: float = 1.0
    max_minutes: float | None = None
    max_steps: int | None = None
    log_every: int = 1
    threads: int | None = 1  # CPU threads for torch (1 avoids thrashing on a shared machine; None: torch's default)
    # identifiers replaced by random ones, consistently across a conversation, each time a sample is drawn
    augment: tuple[str, ...] = ()  # "pdb_ids", "residue_numbers"

    @classmethod
    def from_dict(cls, d: dict | None) -> "TrainSettings":
        d = dict(d or {})
        unknown = sorted(set(d) - set(cls.__dataclass_fields__))
        if unknown:
            raise EvalError(f"training: unknown key(s) {', '.join(unknown)}")
        aug = d.get("augment") or ()
        aug = (aug,) if isinstance(aug, str) else tuple(aug)
        bad = sorted(set(aug) - set(AUGMENTATIONS))
        if bad:
            raise EvalError(f"training.augment: unknown {', '.join(bad)} (expected some of {', '.join(AUGMENTATIONS)})")
        d["augment"] = aug
        return cls(**d)


@dataclass
class FinetuneConfig:
    """A parsed fine-tuning config (see eval/configs/finetune_tiny.yaml for every key)."""

    name: str
    seed: int
    work_dir: Path
    structures: list[Path]
    train_set: SetSpec
    base: str
    tiny: dict
    lora: dict | None
    device: str
    dtype: str
    gradient_checkpointing: bool
    freeze_vision: bool
    min_pixels: int | None
    max_pixels: int | None
    training: TrainSettings
    outputs: dict[str, Path]
    flavour_training: dict[str, dict] = field(default_factory=dict)
    only_correct: bool = False
    source: str = ""

    @classmethod
    def load(cls, path: str | Path) -> "FinetuneConfig":
        raw = load_yaml(path)
        return cls.from_dict(raw, source=str(path))

    @classmethod
    def from_dict(cls, raw: dict, source: str = "") -> "FinetuneConfig":
        known = {"name", "seed", "work_dir", "structures", "train_set", "model", "training", "pixels", "flavours",
                 "only_correct"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise EvalError(f"{source}: unknown key(s) {', '.join(unknown)}")
        if "train_set" not in raw:
            raise EvalError(f"{source}: missing 'train_set'")
        work = resolve(raw.get("work_dir", "eval/work"))
        model = dict(raw.get("model") or {})
        flavours = dict(raw.get("flavours") or {})
        outputs, per_flavour = {}, {}
        for fl in FLAVOURS:
            spec = dict(flavours.get(fl) or {})
            outputs[fl] = resolve(spec.pop("out", work / "models" / fl))
            per_flavour[fl] = spec.pop("training", {}) or {}
            if spec:
                raise EvalError(f"{source}: flavours.{fl}: unknown key(s) {', '.join(sorted(spec))}")
        pixels = dict(raw.get("pixels") or {})
        return cls(
            name=str(raw.get("name", "finetune")), seed=int(raw.get("seed", 0)), work_dir=work,
            structures=[resolve(s) for s in raw.get("structures", [])],
            train_set=SetSpec.from_dict("train", raw["train_set"], work / "sets" / "train"),
            base=str(model.get("base", "tiny")), tiny=dict(model.get("tiny") or {}), lora=model.get("lora"),
            device=str(model.get("device", "cpu")), dtype=str(model.get("dtype", "float32")),
            gradient_checkpointing=bool(model.get("gradient_checkpointing", False)),
            freeze_vision=bool(model.get("freeze_vision", False)),
            min_pixels=pixels.get("min_pixels"), max_pixels=pixels.get("max_pixels"),
            training=TrainSettings.from_dict(raw.get("training")), outputs=outputs, flavour_training=per_flavour,
            only_correct=bool(raw.get("only_correct", False)), source=source)

    def settings_for(self, flavour: str) -> TrainSettings:
        merged = {**vars(self.training), **self.flavour_training.get(flavour, {})}
        return TrainSettings.from_dict(merged)


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ----------------------------------------------------------------------------- data


def transcripts_for(cfg: FinetuneConfig, flavour: str, progress: bool = True) -> tuple[list[dict], dict]:
    """The training conversations of ``flavour`` (distilled once, then read from the work folder)."""
    from misi_agent.agent.store import StructureStore

    qpath = ensure_question_set(cfg.train_set, progress=progress)
    path = cfg.work_dir / f"transcripts-{flavour}.jsonl"
    stats_path = path.with_suffix(".stats.json")
    if not path.is_file():
        store = StructureStore(cfg.structures, use_env=False)
        cache = CallCache(cfg.work_dir / "cache.sqlite")
        try:
            counts = distill(qpath, path, store, cache, flavour=flavour, progress=progress)
        finally:
            cache.close()
        write_text_atomic(stats_path, json.dumps(counts, indent=2) + "\n")
    rows = read_transcripts(path)
    counts = json.loads(stats_path.read_text()) if stats_path.is_file() else {}
    if cfg.only_correct and flavour == "tools":
        rows = [r for r in rows if not r["complete"] or (r.get("composite") or 0) >= 0.999]
    return rows, counts


def corpus_of(rows: list[dict], processor_template: str) -> list[str]:
    """Text for the tiny tokenizer: the rendered conversations, split at special tokens."""
    from transformers.utils.chat_template_utils import render_jinja_template

    texts = []
    for r in rows:
        rendered = render_jinja_template([r["messages"]], tools=r["tools"] or None, chat_template=processor_template,
                                         add_generation_prompt=False)
        text = rendered[0][0] if isinstance(rendered, tuple) else rendered
        text = text[0] if isinstance(text, list) else text
        texts += [t for t in _SPECIAL_RE.split(text) if t.strip()]
    return texts


@dataclass
class Encoded:
    """One tokenised training sample."""

    id: str
    input_ids: Any
    labels: Any
    pixel_values: Any
    image_grid_thw: Any
    n_tokens: int
    n_label_tokens: int
    extra: dict = field(default_factory=dict)  # other processor outputs (mm_token_type_ids: the mrope positions)


def render_text(processor, messages: list[dict], tools: list[dict] | None) -> str:
    return processor.apply_chat_template(messages, tools=tools or None, tokenize=False, add_generation_prompt=False)


def assistant_labels(input_ids: list[int], tokenizer) -> list[int]:
    """-100 everywhere except the assistant turns' content and their closing ``<|im_end|>``."""
    start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    labels = [-100] * len(input_ids)
    i = 0
    n = len(input_ids)
    while i < n:
        if input_ids[i] != start:
            i += 1
            continue
        j = i + 1
        header = ""
        while j < n and "\n" not in header and input_ids[j] not in (start, end):
            header += tokenizer.decode([input_ids[j]])
            j += 1
        role = header.strip()
        k = j
        while k < n and input_ids[k] != end:
            k += 1
        if role == "assistant" and header.endswith("\n"):
            for t in range(j, min(k + 1, n)):
                labels[t] = input_ids[t]
        i = k + 1
    return labels


def encode(processor, row: dict, max_length: int) -> Encoded | None:
    """Tokenise one conversation with its images; None when longer than ``max_length``."""
    from PIL import Image

    images = []
    for m in row["messages"]:
        if isinstance(m.get("content"), list):
            for part in m["content"]:
                if part.get("type") == "image":  # absolute, or relative to the repository root
                    with Image.open(resolve(part["path"])) as im:
                        images.append(im.convert("RGB"))
    text = render_text(processor, row["messages"], row["tools"])
    enc = processor(text=[text], images=images or None, return_tensors="pt")
    ids = enc["input_ids"][0]
    if ids.shape[0] > max_length:
        return None
    import torch

    labels = torch.tensor(assistant_labels(ids.tolist(), processor.tokenizer))
    extra = {k: v[0] for k, v in enc.items()
             if k not in ("input_ids", "attention_mask", "pixel_values", "image_grid_thw") and hasattr(v, "shape")
             and v.ndim == 2 and v.shape[0] == 1 and v.shape[1] == ids.shape[0]}
    return Encoded(row["id"], ids, labels, enc.get("pixel_values"), enc.get("image_grid_thw"), int(ids.shape[0]),
                   int((labels != -100).sum()), extra)


def _map_strings(obj: Any, fn) -> Any:
    """Apply ``fn`` to every string inside ``obj`` (messages: text parts, contents, call arguments), not to paths."""
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, list):
        return [_map_strings(v, fn) for v in obj]
    if isinstance(obj, dict):
        return {k: (v if k in ("path", "role", "type", "id", "tool_call_id", "name") else _map_strings(v, fn))
                for k, v in obj.items()}
    return obj


def _sub_word(text: str, old: str, new: str) -> str:
    """Replace ``old`` as a whole word, keeping the case of each occurrence (upper or lower)."""
    pat = re.compile(r"(?<![A-Za-z0-9])" + re.escape(old) + r"(?![A-Za-z0-9])", re.IGNORECASE)
    return pat.sub(lambda m: new if m.group(0) == old else new.lower() if m.group(0).islower() else new.upper(), text)


def augment_row(row: dict, rng: random.Random, what: tuple[str, ...]) -> dict:
    """The conversation with its PDB IDs and/or named residue numbers replaced by random ones, consistently.

    A small model given ~250 training entries memorises their IDs instead of copying them
    from the question; fresh identifiers at every draw leave copying as the only way to
    the right arguments (OURS: training recipe). PDB IDs are not drawn in the pictures;
    residue numbers are (labels), so ``residue_numbers`` is for models that cannot read them.
    """
    from misi_agent.agent.details import read_details

    question = next((p["text"] for m in row["messages"] if m["role"] == "user" and isinstance(m["content"], list)
                     for p in m["content"] if p.get("type") == "text" and len(p.get("text", "")) > 200), "")
    d = read_details(question)
    subs: list[tuple[str, str]] = []
    if "pdb_ids" in what:
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
        for pid in d.pdb_ids:
            new = str(rng.randint(1, 9)) + "".join(rng.choice(alphabet) for _ in range(3))
            subs.append((pid, new))
    if "residue_numbers" in what:
        res = d.bond.residue if d.bond else d.residue
        if res is not None:
            num = rng.randint(1, 999)
            subs.append((f"{res.name} {res.number}{res.ins_code}", f"{res.name} {num}{res.ins_code}"))
            # the interaction-location call names the number on its own
            subs.append((f'"residue_number": "{res.number}{res.ins_code}"', f'"residue_number": "{num}{res.ins_code}"'))
    if not subs:
        return row

    def fn(text: str) -> str:
        for old, new in subs:
            text = _sub_word(text, old, new)
        return text

    return {**row, "messages": _map_strings(row["messages"], fn)}


# ----------------------------------------------------------------------------- models


def build_processor(tokenizer, image_processor):
    """The image-only Qwen2.5-VL processor with the shipped tool template (as the planner builds it)."""
    from misi_agent.agent.planners.transformers_vlm import _processor_classes, load_tools_template

    qwen25, _ = _processor_classes()
    return qwen25(image_processor=image_processor, tokenizer=tokenizer, chat_template=load_tools_template())


def tiny_model(cfg: FinetuneConfig, rows: list[dict]):
    """(model, processor, info) for a from-scratch tiny model; the tokenizer is trained on ``rows``."""
    from misi_agent.agent.planners.transformers_vlm import load_tools_template
    from misi_agent.agent.tiny_model import (TinyConfig, build_model, count_parameters, default_corpus,
                                             image_processor, tiny_tokenizer)

    tc = TinyConfig.from_dict({**cfg.tiny, "seed": cfg.seed})
    if tc.family != "qwen2_5_vl":
        raise EvalError("the fine-tuning recipe trains the Qwen2.5-VL architecture (model.tiny.family: qwen2_5_vl)")
    corpus = default_corpus() + corpus_of(rows, load_tools_template())
    tok = tiny_tokenizer(corpus, vocab_size=tc.vocab_size, repeat=1, byte_level_regex=tc.byte_level_regex,
                         isolate=tc.isolate)
    model, patch = build_model(tc, tok)
    ip = image_processor(patch, tc)
    if cfg.min_pixels or cfg.max_pixels:
        lim = pixel_limits(ip)
        set_pixels(ip, cfg.min_pixels or lim["min_pixels"], cfg.max_pixels or lim["max_pixels"])
    return model, build_processor(tok, ip), {"kind": "tiny", "tiny": tc.to_dict(), "parameters": count_parameters(model),
                                             "vocab": len(tok)}


def pixel_limits(ip) -> dict[str, int | None]:
    """(min, max) pixels per image of an image processor (``size`` in transformers 5, attributes before)."""
    size = getattr(ip, "size", None) or {}
    return {"min_pixels": getattr(ip, "min_pixels", None) or size.get("shortest_edge"),
            "max_pixels": getattr(ip, "max_pixels", None) or size.get("longest_edge")}


def set_pixels(ip, min_pixels: int, max_pixels: int) -> None:
    ip.size = {"shortest_edge": int(min_pixels), "longest_edge": int(max_pixels)}
    for attr, value in (("min_pixels", min_pixels), ("max_pixels", max_pixels)):
        if hasattr(ip, attr):
            setattr(ip, attr, int(value))


def checkpoint_model(cfg: FinetuneConfig):
    """(model, processor, info) for a local checkpoint; LoRA adapters when ``model.lora`` is set (needs peft)."""
    import torch
    from transformers import AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer

    base = resolve(cfg.base)
    if not (base / "config.json").is_file() or not any(base.glob("*.safetensors")):
        raise EvalError(f"model.base {base}: not a local checkpoint folder with config.json and *.safetensors")
    peft = None
    if cfg.lora:
        try:
            import peft  # noqa: F811
        except ImportError:
            raise EvalError("model.lora needs the 'peft' package, which is not installed (pip install peft), "
                            "or set model.lora: null for full fine-tuning") from None
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}.get(cfg.dtype)
    if dtype is None:
        raise EvalError(f"model.dtype {cfg.dtype!r}: expected float32, bfloat16 or float16")
    common = {"local_files_only": True, "trust_remote_code": False}
    tok = AutoTokenizer.from_pretrained(base, **common)
    ip = AutoImageProcessor.from_pretrained(base, **common)
    if cfg.min_pixels or cfg.max_pixels:
        lim = pixel_limits(ip)
        set_pixels(ip, cfg.min_pixels or lim["min_pixels"] or 3136, cfg.max_pixels or lim["max_pixels"] or 512 * 512)
    model = AutoModelForImageTextToText.from_pretrained(base, use_safetensors=True, dtype=dtype, **common)
    if getattr(model.config, "model_type", "") not in ("qwen2_5_vl", "qwen2_vl"):
        raise EvalError(f"model.base {base}: model type {model.config.model_type!r}; the recipe trains Qwen2.5-VL")
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    if cfg.freeze_vision:
        for p in model.model.visual.parameters():
            p.requires_grad_(False)
    if peft is not None:
        lc = dict(cfg.lora)
        lora = peft.LoraConfig(r=int(lc.get("r", 16)), lora_alpha=int(lc.get("alpha", 32)),
                               lora_dropout=float(lc.get("dropout", 0.05)),
                               target_modules=lc.get("target_modules", ["q_proj", "k_proj", "v_proj", "o_proj"]),
                               task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, lora)
    n_train = int(sum(p.numel() for p in model.parameters() if p.requires_grad))
    return model, build_processor(tok, ip), {"kind": "checkpoint", "base": str(base), "lora": cfg.lora,
                                             "trainable_parameters": n_train}


# ----------------------------------------------------------------------------- training


def peak_memory_mb(device: str) -> dict[str, float]:
    import torch

    out = {"process_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if device.startswith("cuda") and torch.cuda.is_available():
        out["cuda_peak_allocated_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return out


def lr_at(step: int, total: int, s: TrainSettings) -> float:
    """Linear warm-up, then cosine decay to ``min_lr_ratio`` of the peak."""
    if step < s.warmup_steps:
        return s.lr * (step + 1) / max(1, s.warmup_steps)
    t = (step - s.warmup_steps) / max(1, total - s.warmup_steps)
    return s.lr * (s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def forward_kwargs(x: Encoded, device: str = "cpu", labels: bool = True) -> dict[str, Any]:
    """The model inputs of one sample, exactly as generation builds them (processor outputs) plus labels."""
    import torch

    kwargs = {"input_ids": x.input_ids[None].to(device), "attention_mask": torch.ones_like(x.input_ids)[None].to(device)}
    if labels:
        kwargs["labels"] = x.labels[None].to(device)
    if x.pixel_values is not None:
        kwargs["pixel_values"] = x.pixel_values.to(device)
        kwargs["image_grid_thw"] = x.image_grid_thw.to(device)
    for k, v in x.extra.items():  # mm_token_type_ids: without it the image tokens get text (1-D) positions
        kwargs[k] = v[None].to(device)
    return kwargs


def train(model, samples: list[Encoded], s: TrainSettings, *, device: str, seed: int,
          progress: bool = True, rows: list[dict] | None = None, processor=None) -> dict[str, Any]:
    """Train on ``samples`` (batch of one, gradient accumulation); return the log.

    With ``s.augment`` (and the ``rows`` behind the samples), every draw re-encodes its
    conversation with fresh identifiers (:func:`augment_row`), seeded by the draw's position.
    """
    import torch
    from tqdm import tqdm

    model.to(device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=s.lr, weight_decay=s.weight_decay)
    n_micro = int(round(s.epochs * len(samples)))
    total_steps = max(1, n_micro // s.grad_accum)
    if s.max_steps is not None:
        total_steps = min(total_steps, int(s.max_steps))
        n_micro = total_steps * s.grad_accum
    rng = random.Random(seed)
    order: list[int] = []
    while len(order) < n_micro:
        epoch = list(range(len(samples)))
        rng.shuffle(epoch)
        order += epoch
    order = order[:n_micro]
    log: dict[str, Any] = {"steps": [], "loss": [], "lr": [], "tokens": 0, "stopped": "completed"}
    t0 = time.perf_counter()
    acc_loss, acc_n, step = 0.0, 0, 0
    bar = tqdm(total=total_steps, desc="fine-tune", unit="step", disable=not progress, file=sys.stderr)
    opt.zero_grad(set_to_none=True)
    aug_rng = random.Random(seed + 1)
    for micro, idx in enumerate(order):
        x = samples[idx]
        if s.augment and rows is not None:
            x = encode(processor, augment_row(rows[idx], aug_rng, s.augment), 10 ** 9) or x
        out = model(**forward_kwargs(x, device))
        (out.loss / s.grad_accum).backward()
        acc_loss += float(out.loss.detach())
        acc_n += 1
        log["tokens"] += x.n_tokens
        if (micro + 1) % s.grad_accum:
            continue
        lr = lr_at(step, total_steps, s)
        for g in opt.param_groups:
            g["lr"] = lr
        torch.nn.utils.clip_grad_norm_(params, s.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        if step % s.log_every == 0 or step == total_steps:
            log["steps"].append(step)
            log["loss"].append(round(acc_loss / acc_n, 5))
            log["lr"].append(lr)
            bar.set_postfix(loss=f"{acc_loss / acc_n:.3f}")
            acc_loss, acc_n = 0.0, 0
        bar.update(1)
        if s.max_minutes is not None and time.perf_counter() - t0 > 60 * s.max_minutes:
            log["stopped"] = f"time limit ({s.max_minutes} min) after {step} of {total_steps} steps"
            break
    bar.close()
    model.eval()
    log.update(total_steps=total_steps, optimizer_steps=step, epochs=round(step * s.grad_accum / len(samples), 3),
               seconds=round(time.perf_counter() - t0, 1))
    return log


def plot_loss(logs: dict[str, dict], path: Path) -> None:
    """Loss per optimiser step (raw and a moving average) for each flavour, one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for (name, log), color in zip(logs.items(), ("#d9822b", "#5b8cc9", "#4caf50")):
        steps, loss = np.array(log["steps"]), np.array(log["loss"])
        if not len(steps):
            continue
        ax.plot(steps, loss, color=color, alpha=0.3, lw=0.8)
        w = max(1, len(loss) // 25)
        smooth = np.convolve(loss, np.ones(w) / w, mode="valid")
        ax.plot(steps[w - 1:], smooth, color=color, lw=1.8, label=f"{name} (moving mean of {w})")
    ax.set_yscale("log")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("loss on assistant tokens")
    ax.set_title("Fine-tuning loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)


def save_checkpoint(model, processor, out: Path, log: dict) -> Path:
    """Write the trained model (safetensors), tokenizer, image processor, template, log and loss plot; atomically."""
    from misi_agent.agent.planners.transformers_vlm import QWEN2_5_VL_TOOLS_TEMPLATE

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial")
    if tmp.exists():
        shutil.rmtree(tmp)
    if hasattr(model, "merge_and_unload"):  # a peft model: fold the adapters into the weights
        model = model.merge_and_unload()
    model.save_pretrained(tmp, safe_serialization=True)
    processor.tokenizer.save_pretrained(tmp)
    processor.image_processor.save_pretrained(tmp)
    shutil.copyfile(QWEN2_5_VL_TOOLS_TEMPLATE, tmp / "chat_template.jinja")
    (tmp / "training_log.json").write_text(json.dumps(log, indent=2) + "\n", encoding="utf-8")
    plot_loss({log["flavour"]: log["train"]}, tmp / "loss.png")
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


def finetune(cfg: FinetuneConfig, flavour: str, *, progress: bool = True, out: Path | None = None) -> dict[str, Any]:
    """Build the data, the model, train, save; return the training log (also in the folder)."""
    import torch

    if flavour not in FLAVOURS:
        raise EvalError(f"unknown flavour {flavour!r} (expected {', '.join(FLAVOURS)})")
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise EvalError(f"model.device {cfg.device}: no CUDA device here")
    out = out or cfg.outputs[flavour]
    seed_everything(cfg.seed)
    threads = cfg.settings_for(flavour).threads
    if threads and not cfg.device.startswith("cuda"):
        torch.set_num_threads(int(threads))
    t_all = time.perf_counter()
    rows, distill_counts = transcripts_for(cfg, flavour, progress=progress)
    if not rows:
        raise EvalError(f"no {flavour} training conversations (see {cfg.work_dir})")
    t_model = time.perf_counter()
    if cfg.base == "tiny":
        model, processor, info = tiny_model(cfg, rows)
    else:
        model, processor, info = checkpoint_model(cfg)
    s = cfg.settings_for(flavour)
    samples, kept, too_long = [], [], 0
    for r in rows:
        e = encode(processor, r, s.max_length)
        if e is None:
            too_long += 1
        else:
            samples.append(e)
            kept.append(r)
    if not samples:
        raise EvalError(f"every {flavour} sample is longer than training.max_length={s.max_length}")
    prep_s = time.perf_counter() - t_model
    log_train = train(model, samples, s, device=cfg.device, seed=cfg.seed, progress=progress, rows=kept,
                      processor=processor)
    lengths = sorted(x.n_tokens for x in samples)
    log = {
        "flavour": flavour, "config": cfg.source, "seed": cfg.seed, "model": info, "device": cfg.device,
        "dtype": cfg.dtype, "settings": vars(s),
        "data": {"train_set": str(cfg.train_set.out), "conversations": len(rows), "samples": len(samples),
                 "too_long": too_long, "complete": sum(bool(r["complete"]) for r in rows),
                 "call_only": sum(not r["complete"] for r in rows), "distill": distill_counts,
                 "tokens_median": lengths[len(lengths) // 2], "tokens_max": lengths[-1],
                 "label_tokens": int(sum(x.n_label_tokens for x in samples))},
        "pixels": pixel_limits(processor.image_processor),
        "train": log_train,
        "seconds": {"prepare": round(prep_s, 1), "train": log_train["seconds"],
                    "total": round(time.perf_counter() - t_all, 1)},
        "memory": peak_memory_mb(cfg.device),
        "torch_threads": torch.get_num_threads(),
    }
    save_checkpoint(model, processor, out, log)
    log["out"] = str(out)
    return log


def reload_and_generate(folder: Path, question_path: Path, *, min_pixels: int | None = None,
                        max_pixels: int | None = None, max_new_tokens: int = 96) -> str:
    """Load ``folder`` through the ``transformers:PATH`` planner and answer the first question (a smoke check)."""
    from misi_agent.agent.loop import build_messages
    from misi_agent.agent.planners import make_planner
    from misi_agent.agent.planners.base import PlannerInput
    from misi_agent.bench.question import read_questions

    q = read_questions(question_path, validate=False)[0]
    planner = make_planner(f"transformers:{folder}", min_pixels=min_pixels, max_pixels=max_pixels,
                           max_new_tokens=max_new_tokens)
    reply = planner.step(PlannerInput(q.task, build_messages(q.question, q.image_paths(question_path.parent)), []))
    return reply.raw


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="fine-tuning YAML (eval/configs/finetune_*.yaml)")
    ap.add_argument("--flavour", choices=FLAVOURS + ("both",), default="both")
    ap.add_argument("--out", default=None, help="output folder (default: the config's flavours.<flavour>.out)")
    ap.add_argument("--plot", default=None, help="also write both flavours' loss curves to this PNG")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    try:
        cfg = FinetuneConfig.load(args.config)
        flavours = FLAVOURS if args.flavour == "both" else (args.flavour,)
        if args.out and len(flavours) > 1:
            raise EvalError("--out needs one --flavour")
        logs = {}
        for fl in flavours:
            log = finetune(cfg, fl, progress=not args.no_progress, out=Path(args.out) if args.out else None)
            logs[fl] = log["train"]
            print(json.dumps({k: log[k] for k in ("flavour", "out", "seconds", "memory", "data")}, indent=2))
        if args.plot:
            plot_loss(logs, Path(args.plot))
    except MisiError as exc:
        print(f"finetune: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
