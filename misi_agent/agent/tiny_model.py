"""Small Qwen-VL-architecture models built from a config, with a tokenizer trained here.

No checkpoint can be downloaded on this project's machines, so tests and the CPU
fine-tuning recipe (``eval/finetune.py``) build their models from scratch: the real
``Qwen2_5_VLForConditionalGeneration`` / ``Qwen3VLForConditionalGeneration`` classes with a
few layers and a small width, a byte-level BPE tokenizer trained on the text the model
will read (the benchmark's prompt templates, the system prompt, the tool specs), Qwen's
special tokens and the ``<tool_call>`` tags, and the PIL image processor. Saved folders
load through the ``transformers:PATH`` planner like any Qwen checkpoint.

:class:`TinyConfig` holds the sizes. Its defaults are the ~120-150k-parameter model of the
agent tests; the fine-tuning recipe uses a wider, deeper one (eval/configs/*.yaml).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>"]
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
FAMILIES = ("qwen2_5_vl", "qwen3_vl")


@dataclass(frozen=True)
class TinyConfig:
    """Sizes of a from-scratch model and its tokenizer.

    ``vocab_size`` is the BPE target (special and tool tokens come on top);
    ``byte_level_regex=False`` lets BPE merge across word boundaries, so long fixed text
    (templates, tool specs) costs few tokens while unseen strings (PDB IDs, atom names)
    stay a few characters each, which a small model can learn to copy.
    ``isolate`` (a regex character class) makes those characters tokens of their own
    everywhere: with ``"[0-9A-Z]"`` a PDB ID, residue number or atom name is the same run of
    single-character tokens in the question, in a tool call and in a tool result, so
    copying it is one uniform operation.
    ``image_min_tokens``/``image_max_tokens`` bound the merged vision tokens per image.
    """

    family: str = "qwen2_5_vl"
    hidden_size: int = 32
    intermediate_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    vision_depth: int = 2
    vision_hidden_size: int = 32
    vision_intermediate_size: int = 64
    vision_heads: int = 2
    vocab_size: int = 1500
    byte_level_regex: bool = True
    isolate: str | None = None  # regex of characters that are always tokens of their own, e.g. "[0-9A-Z]"
    max_position_embeddings: int = 4096
    image_min_tokens: int = 4
    image_max_tokens: int = 64
    seed: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None) -> "TinyConfig":
        data = dict(data or {})
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            from misi_agent.errors import MisiError

            raise MisiError(f"unknown tiny-model setting(s): {', '.join(unknown)}")
        return cls(**data)


def default_corpus() -> list[str]:
    """The text the agent's model reads: system prompt, prompt templates, spatial tool specs, answers."""
    from misi_agent.agent.loop import SYSTEM_PROMPT
    from misi_agent.agent.toolset import SPATIAL_CONTRACTS
    from misi_agent.bench.prompts import TEMPLATES

    return [SYSTEM_PROMPT, *TEMPLATES.values(), *(json.dumps(c.parameters) + c.description
                                                 for c in SPATIAL_CONTRACTS.values()),
            '{"name": "residue_hbonds", "arguments": {"pdb_id": "6yqw", "residue": "ARG 45", "chain": "A"}}',
            "Yes: ARG NH2, O1B; ARG NE, O2G", "move x 3, roll y 15"]


def tiny_tokenizer(corpus: Iterable[str] | None = None, vocab_size: int = 1500, repeat: int = 4,
                   byte_level_regex: bool = True, isolate: str | None = None):
    """A byte-level BPE tokenizer trained on ``corpus`` (default :func:`default_corpus`) with Qwen's special tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=byte_level_regex)
    steps = []
    if not byte_level_regex:  # merges may cross spaces but never a line end: a turn's header ("assistant\n") stays apart
        steps.append(pre_tokenizers.Split("\n", behavior="merged_with_previous"))
    if isolate:
        steps.append(pre_tokenizers.Split(Regex(isolate), behavior="isolated"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps + [byte_level]) if steps else byte_level
    tok.decoder = decoders.ByteLevel()
    texts = list(default_corpus() if corpus is None else corpus) * repeat
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.add_tokens(TOOL_TOKENS)  # ordinary added tokens (not special), as in Qwen's tokenizer
    return fast


def build_model(cfg: TinyConfig, tokenizer):
    """A randomly initialised Qwen2.5-VL / Qwen3-VL model of ``cfg``'s sizes (seeded) and its patch size."""
    import torch

    if cfg.family not in FAMILIES:
        raise ValueError(f"unknown family {cfg.family!r} (expected {', '.join(FAMILIES)})")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    vision_ids = dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                      vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    # mrope sections (temporal, height, width) split half the head dimension
    half = head_dim // 2
    mrope = [half - 2 * (3 * half // 8), 3 * half // 8, 3 * half // 8]
    text = dict(vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
                num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
                num_key_value_heads=cfg.num_key_value_heads, max_position_embeddings=cfg.max_position_embeddings,
                pad_token_id=ids["<|endoftext|>"])
    torch.manual_seed(cfg.seed)
    if cfg.family == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

        conf = Qwen2_5_VLConfig(
            text_config=dict(text, rope_parameters={"rope_type": "default", "mrope_section": mrope,
                                                    "rope_theta": 10000.0},
                             bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"]),
            vision_config=dict(depth=cfg.vision_depth, hidden_size=cfg.vision_hidden_size,
                               intermediate_size=cfg.vision_intermediate_size, num_heads=cfg.vision_heads,
                               patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56,
                               out_hidden_size=cfg.hidden_size, fullatt_block_indexes=[cfg.vision_depth - 1]),
            **vision_ids)
        return Qwen2_5_VLForConditionalGeneration(conf), 14
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    conf = Qwen3VLConfig(
        text_config=dict(text, head_dim=head_dim, rope_parameters={"rope_type": "default", "mrope_section": mrope,
                                                                   "mrope_interleaved": True, "rope_theta": 10000.0}),
        vision_config=dict(depth=cfg.vision_depth, hidden_size=cfg.vision_hidden_size,
                           intermediate_size=cfg.vision_intermediate_size, num_heads=cfg.vision_heads, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=cfg.hidden_size,
                           num_position_embeddings=64, deepstack_visual_indexes=[cfg.vision_depth - 1]),
        **vision_ids)
    return Qwen3VLForConditionalGeneration(conf), 16


def image_processor(patch: int, cfg: TinyConfig):
    """The PIL image processor with pixel limits of ``cfg.image_min_tokens``..``image_max_tokens`` merged tokens."""
    from transformers import Qwen2VLImageProcessorPil

    return Qwen2VLImageProcessorPil(patch_size=patch, min_pixels=(2 * patch) ** 2 * cfg.image_min_tokens,
                                    max_pixels=(2 * patch) ** 2 * cfg.image_max_tokens)


def save_model(folder: Path, model, tokenizer, processor, safetensors: bool = True,
               extra: dict | None = None) -> Path:
    """Write weights (safetensors), tokenizer, image processor and ``extra`` JSON files into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=safetensors)
    tokenizer.save_pretrained(folder)
    processor.save_pretrained(folder)
    for name, obj in (extra or {}).items():
        (folder / name).write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
    return folder


def save_tiny_qwen(folder: Path, family: str = "qwen2_5_vl", safetensors: bool = True,
                   cfg: TinyConfig | None = None, corpus: Iterable[str] | None = None) -> Path:
    """A small Qwen2.5-VL or Qwen3-VL (random weights) saved with tokenizer and image processor.

    With the default ``cfg`` it is the ~120-150k-parameter model of the agent tests.
    """
    cfg = cfg or TinyConfig(family=family)
    if cfg.family != family:
        cfg = TinyConfig(**{**cfg.to_dict(), "family": family})
    fast = tiny_tokenizer(corpus, vocab_size=cfg.vocab_size, byte_level_regex=cfg.byte_level_regex,
                          isolate=cfg.isolate)
    model, patch = build_model(cfg, fast)
    return save_model(Path(folder), model, fast, image_processor(patch, cfg), safetensors=safetensors)


def count_parameters(model) -> int:
    return int(sum(p.numel() for p in model.parameters()))


__all__ = ["SPECIAL_TOKENS", "TOOL_TOKENS", "TinyConfig", "default_corpus", "tiny_tokenizer", "build_model",
           "image_processor", "save_model", "save_tiny_qwen", "count_parameters"]
