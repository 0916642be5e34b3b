"""``transformers:PATH``: a local Hugging Face vision-language model as the planner.

Qwen2.5-VL and Qwen3-VL (and Qwen2-VL) checkpoints first. The model reads several images
per turn and calls tools through its chat template: the tool specs go into the template's
``<tools>`` section, the model writes ``<tool_call>{…}</tool_call>``, and tool results come
back as tool turns (``<tool_response>`` blocks). Qwen2.5-VL's own template has no tool
section, so this package ships one (``templates/qwen2_5_vl_tools.jinja``); Qwen3-VL's own
template has one and is used as is.

Safety and reproducibility:

* only a local folder is accepted (``local_files_only``; nothing is downloaded);
* ``trust_remote_code`` is off unless the caller passes it explicitly, so no code from the
  model folder runs;
* weights load from safetensors only (``use_safetensors=True``; a folder without
  ``*.safetensors`` is refused);
* greedy decoding, seeded; pixel limits (``min_pixels``/``max_pixels``, which decide how
  many vision tokens an image costs) are set on the image processor and recorded in
  :meth:`describe`, so every trace says how the images were seen.

torchvision cannot be installed beside this project's torch, so the processors are built
here from their parts: the PIL image processor plus the tokenizer, without the video
processor the stock Qwen processors ask for (:class:`ImageOnlyQwen2_5_VLProcessor`,
:class:`ImageOnlyQwen3VLProcessor`).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from misi_agent.agent.parsing import parse_tool_calls
from misi_agent.agent.planners.base import Planner, PlannerError, PlannerInput, PlannerReply

TEMPLATE_DIR = Path(__file__).resolve().parent.parent / "templates"
QWEN2_5_VL_TOOLS_TEMPLATE = TEMPLATE_DIR / "qwen2_5_vl_tools.jinja"

# Pixel limits: images are resized so that min_pixels <= h*w <= max_pixels (multiples of
# 28 px for Qwen2/2.5-VL). One vision token covers 28x28 px after merging, so the default
# cap (512x512 px, MiSI renders are square) costs at most ~330 tokens per image.
DEFAULT_MIN_PIXELS = 28 * 28 * 4
DEFAULT_MAX_PIXELS = 512 * 512
DEFAULT_MAX_NEW_TOKENS = 512
SUPPORTED = ("qwen2_5_vl", "qwen2_vl", "qwen3_vl", "qwen3_vl_moe")
OWN_TEMPLATE_FAMILIES = ("qwen2_5_vl", "qwen2_vl")  # their stock templates have no tool section


def load_tools_template() -> str:
    """The shipped Qwen2.5-VL chat template with a tool section."""
    return QWEN2_5_VL_TOOLS_TEMPLATE.read_text(encoding="utf-8")


def _processor_classes():
    """Image-only subclasses of the stock Qwen processors (no video processor, no torchvision)."""
    from transformers import Qwen2_5_VLProcessor, Qwen3VLProcessor

    class ImageOnlyQwen2_5_VLProcessor(Qwen2_5_VLProcessor):
        """Qwen2.5-VL (and Qwen2-VL) processor from an image processor and a tokenizer only."""

        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            super().__init__(image_processor=image_processor, tokenizer=tokenizer, video_processor=None,
                             chat_template=chat_template, **kwargs)

    class ImageOnlyQwen3VLProcessor(Qwen3VLProcessor):
        """Qwen3-VL processor from an image processor and a tokenizer only."""

        def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
            super().__init__(image_processor=image_processor, tokenizer=tokenizer, video_processor=None,
                             chat_template=chat_template, **kwargs)

    return ImageOnlyQwen2_5_VLProcessor, ImageOnlyQwen3VLProcessor


def _folder_template(folder: Path) -> str | None:
    """A chat template stored in the model folder (chat_template.jinja / .json), if any."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    js = folder / "chat_template.json"
    if js.is_file():
        try:
            value = json.loads(js.read_text(encoding="utf-8")).get("chat_template")
        except (json.JSONDecodeError, AttributeError):
            return None
        return value if isinstance(value, str) else None
    return None


class TransformersPlanner(Planner):
    """A local Qwen-VL-family checkpoint, greedy decoding, tool calls via the chat template."""

    kind = "transformers"

    def __init__(self, path: str | Path, *, min_pixels: int = DEFAULT_MIN_PIXELS, max_pixels: int = DEFAULT_MAX_PIXELS,
                 max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, trust_remote_code: bool = False,
                 chat_template: str | Path | None = None, device: str = "cpu", dtype: str = "auto",
                 seed: int = 0, model_name: str | None = None) -> None:
        self.path = Path(path)
        if not self.path.is_dir() or not (self.path / "config.json").is_file():
            raise PlannerError(f"transformers planner: {self.path} is not a local model folder (no config.json)")
        if not any(self.path.glob("*.safetensors")):
            raise PlannerError(f"transformers planner: {self.path} holds no *.safetensors weights (other formats are refused)")
        if not 0 < min_pixels <= max_pixels:
            raise PlannerError(f"pixel limits must satisfy 0 < min_pixels <= max_pixels (got {min_pixels}, {max_pixels})")
        self.min_pixels, self.max_pixels = int(min_pixels), int(max_pixels)
        self.max_new_tokens = int(max_new_tokens)
        self.trust_remote_code = bool(trust_remote_code)
        if device == "auto":
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        self.seed = seed
        self.model_name = model_name or self.path.name
        self._load(chat_template, dtype)

    # ------------------------------------------------------------------ loading

    def _load(self, chat_template: str | Path | None, dtype: str) -> None:
        import torch
        from transformers import AutoConfig, AutoImageProcessor, AutoModelForImageTextToText, AutoTokenizer
        from transformers.utils import logging as hf_logging

        common = {"local_files_only": True, "trust_remote_code": self.trust_remote_code}
        try:
            config = AutoConfig.from_pretrained(self.path, **common)
        except (OSError, ValueError, KeyError) as exc:
            raise PlannerError(f"transformers planner: cannot read {self.path}/config.json "
                               f"({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
        self.model_type = getattr(config, "model_type", "")
        if self.model_type not in SUPPORTED and not self.trust_remote_code:
            raise PlannerError(f"transformers planner: model type {self.model_type!r} is not supported "
                               f"(supported: {', '.join(SUPPORTED)})")
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # the PIL fallback warning (no torchvision) is expected
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.path, **common)
            image_processor = AutoImageProcessor.from_pretrained(self.path, **common)
            torch_dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16,
                           "float16": torch.float16}.get(dtype)
            if torch_dtype is None:
                raise PlannerError(f"unknown dtype {dtype!r} (auto, float32, bfloat16, float16)")
            self.model = AutoModelForImageTextToText.from_pretrained(
                self.path, use_safetensors=True, dtype=torch_dtype, **common).to(self.device).eval()
        except PlannerError:
            raise
        except (OSError, ValueError, KeyError, RuntimeError, AssertionError) as exc:
            raise PlannerError(f"transformers planner: cannot load {self.path} "
                               f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
        finally:
            hf_logging.set_verbosity(verbosity)
        image_processor.size = {"shortest_edge": self.min_pixels, "longest_edge": self.max_pixels}
        for attr, value in (("min_pixels", self.min_pixels), ("max_pixels", self.max_pixels)):
            if hasattr(image_processor, attr):
                setattr(image_processor, attr, value)
        if chat_template is not None:
            p = Path(chat_template)
            template = p.read_text(encoding="utf-8") if p.is_file() else str(chat_template)
            self.template_source = str(p) if p.is_file() else "given"
        elif self.model_type in OWN_TEMPLATE_FAMILIES:
            template, self.template_source = load_tools_template(), QWEN2_5_VL_TOOLS_TEMPLATE.name
        else:
            template = _folder_template(self.path) or getattr(tokenizer, "chat_template", None)
            self.template_source = "model folder"
            if not template or "tools" not in template:
                template, self.template_source = load_tools_template(), QWEN2_5_VL_TOOLS_TEMPLATE.name
        qwen25, qwen3 = _processor_classes()
        cls = qwen3 if self.model_type.startswith("qwen3") else qwen25
        self.processor = cls(image_processor=image_processor, tokenizer=tokenizer, chat_template=template)
        self.tokenizer = tokenizer
        stop = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
        self.stop_ids = [i for i in stop if isinstance(i, int) and i >= 0 and i != tokenizer.unk_token_id]
        if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in self.stop_ids:
            self.stop_ids.append(tokenizer.eos_token_id)

    def describe(self) -> dict[str, Any]:
        return {"planner": self.kind, "model": self.model_name, "path": str(self.path), "model_type": self.model_type,
                "min_pixels": self.min_pixels, "max_pixels": self.max_pixels, "max_new_tokens": self.max_new_tokens,
                "decoding": "greedy", "seed": self.seed, "chat_template": self.template_source,
                "trust_remote_code": self.trust_remote_code, "device": self.device}

    # ------------------------------------------------------------------ one step

    def render_prompt(self, inp: PlannerInput) -> tuple[str, list]:
        """The prompt text from the chat template and the images it refers to, in order."""
        from PIL import Image

        images = []
        for m in inp.messages:
            if isinstance(m.get("content"), list):
                for part in m["content"]:
                    if part.get("type") == "image":
                        try:
                            with Image.open(part["path"]) as im:
                                images.append(im.convert("RGB"))
                        except OSError as exc:
                            raise PlannerError(f"cannot read image {part['path']}: {exc}") from None
        try:
            text = self.processor.apply_chat_template(inp.messages, tools=inp.tools or None, tokenize=False,
                                                      add_generation_prompt=True)
        except Exception as exc:  # jinja errors: a template that does not fit these messages
            raise PlannerError(f"chat template failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
        return text, images

    def step(self, inp: PlannerInput) -> PlannerReply:
        import torch

        t0 = time.perf_counter()
        text, images = self.render_prompt(inp)
        inputs = self.processor(text=[text], images=images or None, return_tensors="pt")
        inputs = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in inputs.items()}
        n_prompt = int(inputs["input_ids"].shape[1])
        torch.manual_seed(self.seed)
        with torch.inference_mode():
            out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False,
                                      eos_token_id=self.stop_ids, pad_token_id=self.stop_ids[-1] if self.stop_ids else None)
        new = out[0, n_prompt:]
        raw = self.tokenizer.decode(new, skip_special_tokens=True)
        rest, calls = parse_tool_calls(raw, id_prefix=f"call_{sum(1 for m in inp.messages if m['role'] == 'assistant')}")
        info = {"prompt_tokens": n_prompt, "new_tokens": int(new.shape[0]), "images": len(images),
                "seconds": round(time.perf_counter() - t0, 4)}
        return PlannerReply(text=rest, tool_calls=tuple(calls), raw=raw, info=info)

    def close(self) -> None:
        self.model = None
