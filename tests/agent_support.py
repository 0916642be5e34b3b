"""Shared helpers of the agent tests: generated question sets, a scripted planner, a tiny Qwen-VL."""
from __future__ import annotations

import json
from pathlib import Path

from misi_agent.agent.parsing import parse_tool_calls
from misi_agent.agent.planners.base import Planner, PlannerInput, PlannerReply
from misi_agent.cli import main

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "misi_agent" / "data" / "structures"


def generate(out: Path, tasks: str, per_task: int, seed: int = 0, size: int = 256) -> Path:
    """Generate a question set from the committed fixtures with the benchmark generator; return questions.jsonl."""
    rc = main(["bench", "generate", "--structures", str(FIXTURES), "--out", str(out), "--tasks", tasks,
               "--per-task", str(per_task), "--split", "all", "--renderer", "raster", "--seed", str(seed),
               "--size", str(size)])
    assert rc == 0
    path = out / "questions.jsonl"
    assert path.is_file()
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class ScriptedPlanner(Planner):
    """A stand-in for a model: replies with the given texts in turn, parsed like a real model's output.

    Records what it was shown (messages, tool specs) so tests can check the conversation.
    """

    kind = "scripted"

    def __init__(self, outputs: list[str]):
        self.outputs = list(outputs)
        self.seen: list[PlannerInput] = []

    def describe(self) -> dict:
        return {"planner": self.kind, "model": "script", "min_pixels": 1, "max_pixels": 2}

    def step(self, inp: PlannerInput) -> PlannerReply:
        self.seen.append(PlannerInput(inp.task, [dict(m) for m in inp.messages], inp.tools))
        raw = self.outputs.pop(0) if self.outputs else "<tool_call>{\"name\": \"structure_info\", \"arguments\": {}}</tool_call>"
        text, calls = parse_tool_calls(raw, id_prefix=f"call_{len(self.seen)}")
        return PlannerReply(text=text, tool_calls=tuple(calls), raw=raw)


# ----------------------------------------------------------------------------- a tiny Qwen-VL

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>"]
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


def tiny_tokenizer():
    """A byte-level BPE tokenizer trained here (tokenizers library) with Qwen's special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    from misi_agent.agent.loop import SYSTEM_PROMPT
    from misi_agent.agent.toolset import SPATIAL_CONTRACTS
    from misi_agent.bench.prompts import TEMPLATES

    # trained on the text the model will read (prompts, tool specs), so prompts stay short
    corpus = [SYSTEM_PROMPT, *TEMPLATES.values(), *(json.dumps(c.parameters) + c.description
                                                     for c in SPATIAL_CONTRACTS.values()),
              '{"name": "residue_hbonds", "arguments": {"pdb_id": "6yqw", "residue": "ARG 45", "chain": "A"}}',
              "Yes: ARG NH2, O1B; ARG NE, O2G", "move x 3, roll y 15"] * 4
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.add_tokens(TOOL_TOKENS)  # ordinary added tokens (not special), as in Qwen's tokenizer
    return fast


def save_tiny_qwen(folder: Path, family: str = "qwen2_5_vl", safetensors: bool = True) -> Path:
    """A ~120-150k-parameter Qwen2.5-VL or Qwen3-VL (random weights) saved with tokenizer and image processor."""
    import torch
    from transformers import Qwen2VLImageProcessorPil

    fast = tiny_tokenizer()
    ids = {t: fast.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    vision_ids = dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                      vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    text = dict(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, max_position_embeddings=4096, pad_token_id=ids["<|endoftext|>"])
    torch.manual_seed(0)
    if family == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

        cfg = Qwen2_5_VLConfig(
            text_config=dict(text, rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3],
                                                    "rope_theta": 10000.0},
                             bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"]),
            vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14,
                               spatial_merge_size=2, temporal_patch_size=2, window_size=56, out_hidden_size=32,
                               fullatt_block_indexes=[1]),
            **vision_ids)
        model = Qwen2_5_VLForConditionalGeneration(cfg)
        patch = 14
    elif family == "qwen3_vl":
        from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

        cfg = Qwen3VLConfig(
            text_config=dict(text, head_dim=16, rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3],
                                                                 "mrope_interleaved": True, "rope_theta": 10000.0}),
            vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                               spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=32,
                               num_position_embeddings=64, deepstack_visual_indexes=[1]),
            **vision_ids)
        model = Qwen3VLForConditionalGeneration(cfg)
        patch = 16
    else:
        raise ValueError(family)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=safetensors)
    fast.save_pretrained(folder)
    Qwen2VLImageProcessorPil(patch_size=patch, min_pixels=(2 * patch) ** 2 * 4,
                             max_pixels=(2 * patch) ** 2 * 64).save_pretrained(folder)
    return folder
