"""On the GPU machine: reload a fine-tuned folder through the transformers:PATH planner (cuda, bf16), generate
one planner step on a training conversation's prompt, and compare the training forward's logits with generation's."""
import json
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO / "eval"))
sys.path.insert(0, str(REPO))
import finetune as F  # noqa: E402
from misi_agent.agent.planners import make_planner  # noqa: E402
from misi_agent.agent.planners.base import PlannerInput  # noqa: E402

folder = Path(sys.argv[1])
rows = F.read_transcripts(REPO / "eval/work/gpu_check/transcripts-tools.jsonl")
lim = F.pixel_limits(__import__("transformers").AutoImageProcessor.from_pretrained(folder))
planner = make_planner(f"transformers:{folder}", min_pixels=lim["min_pixels"], max_pixels=lim["max_pixels"],
                       max_new_tokens=64, device="cuda", dtype="bfloat16")
print(json.dumps(planner.describe()))
row = rows[0]
msgs = [dict(m) for m in row["messages"][:2]]
for m in msgs:
    if isinstance(m.get("content"), list):
        m["content"] = [dict(p, path=str(F.resolve(p["path"]))) if p.get("type") == "image" else p for p in m["content"]]
inp = PlannerInput(row["task"], msgs, row["tools"])
reply = planner.step(inp)
print("raw:", json.dumps(reply.raw), "calls:", [c.to_dict() for c in reply.tool_calls], "info:", reply.info)
text, images = planner.render_prompt(inp)
enc = {k: v.to("cuda") for k, v in planner.processor(text=[text], images=images, return_tensors="pt").items()}
x = F.encode(F.build_processor(planner.tokenizer, planner.processor.image_processor), {**row, "messages": msgs}, 10 ** 9)
n = enc["input_ids"].shape[1]
with torch.no_grad():
    gen = planner.model.generate(**enc, max_new_tokens=1, do_sample=False, output_logits=True, return_dict_in_generate=True)
    full = planner.model(**F.forward_kwargs(x, "cuda", labels=False)).logits[0, n - 1]
print("prompt tokens", n, "max |logit difference| training forward vs generation:",
      float((gen.logits[0][0].float() - full.float()).abs().max()))
