"""Prepare the GPU check of the fine-tuning recipe's checkpoint path (LoRA through peft, bf16, CUDA).

    python eval/results/ablation/gpu_check/prepare_bundle.py

No real checkpoint can be downloaded here, so the stand-in "local checkpoint" is a small
Qwen2.5-VL built from eval/configs/finetune_tiny.yaml's sizes with its tokenizer, saved
untrained to eval/work/gpu_check/base. Sixteen training conversations of each flavour
(with their images, paths relative to the repository root) and two configs go beside it:
``finetune_lora.yaml`` (LoRA r=8 on the language model's projections, bfloat16, gradient
checkpointing, frozen vision tower) and ``finetune_full.yaml`` (full fine-tuning in
bfloat16). The GPU machine then runs eval/finetune.py on both and reloads the LoRA result
through the ``transformers:PATH`` planner (see run_on_gpu.sh beside this file).
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO / "eval"))

import yaml  # noqa: E402

import finetune as F  # noqa: E402

OUT = REPO / "eval" / "work" / "gpu_check"
N = 16


def main() -> None:
    cfg = F.FinetuneConfig.load(REPO / "eval" / "configs" / "finetune_tiny.yaml")
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "sets" / "train").mkdir(parents=True)
    questions = []
    for flavour in F.FLAVOURS:
        rows, _ = F.transcripts_for(cfg, flavour, progress=False)
        picked = [rows[i * len(rows) // N] for i in range(N)]  # spread over the tasks
        for r in picked:
            for m in r["messages"]:
                if isinstance(m.get("content"), list):
                    for part in m["content"]:
                        if part.get("type") == "image":
                            src = Path(part["path"])
                            dst = OUT / "images" / r["id"] / src.name
                            dst.parent.mkdir(parents=True, exist_ok=True)
                            shutil.copyfile(src, dst)
                            part["path"] = str(dst.relative_to(REPO))
        (OUT / f"transcripts-{flavour}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in picked))
        if flavour == "tools":
            model, processor, _ = F.tiny_model(cfg, picked)
            F.save_checkpoint(model, processor, OUT / "base", {"flavour": "untrained stand-in", "train": {
                "steps": [], "loss": []}})
        questions += [r["id"] for r in picked]
    # the recipe checks that the training set exists; its conversations are the files above
    qsrc = cfg.train_set.questions
    keep = {json.loads(line)["id"]: line for line in qsrc.read_text().splitlines() if line.strip()}
    (OUT / "sets" / "train" / "questions.jsonl").write_text("".join(keep[i] + "\n" for i in dict.fromkeys(questions)))
    common = {
        "name": "gpu_check", "seed": 0, "work_dir": "eval/work/gpu_check",
        "train_set": {"structures": ".", "split": "train", "out": "eval/work/gpu_check/sets/train"},
        "training": {"epochs": 4, "lr": 1.0e-3, "warmup_steps": 2, "grad_accum": 2, "max_length": 4096,
                     "max_steps": 24, "threads": None},
    }
    lora = {**common, "model": {"base": "eval/work/gpu_check/base", "device": "cuda", "dtype": "bfloat16",
                                "gradient_checkpointing": True, "freeze_vision": True,
                                "lora": {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules":
                                         r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"}}}
    full = {**common, "model": {"base": "eval/work/gpu_check/base", "device": "cuda", "dtype": "bfloat16",
                                "lora": None}}
    (OUT / "finetune_lora.yaml").write_text(yaml.safe_dump(lora, sort_keys=False))
    (OUT / "finetune_full.yaml").write_text(yaml.safe_dump(full, sort_keys=False))
    size = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"{OUT}: {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
