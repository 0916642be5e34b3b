#!/usr/bin/env bash
# Set up a fresh virtual environment with the pinned stack and run the main job on the embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
rm -rf .venv
"$PY" -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q torch==2.13.0          # the CPU wheel; an unpinned torch pulls a CUDA build
.venv/bin/pip install -q -e '.[test]'
# Main job on the embedded default: answer the committed example questions (one per task,
# generated from the committed structures) with the deterministic router and its tools, then score them.
rm -rf out/demo && mkdir -p out/demo/traces
.venv/bin/misi-agent answer examples/items/pocket_ligand_interaction-7ush-0/question.json \
    --trace out/demo/trace-pocket_ligand_interaction.json
.venv/bin/misi-agent run examples/questions.jsonl --out out/demo/predictions.jsonl --trace out/demo/traces
.venv/bin/misi-agent bench score --gold examples/questions.jsonl --pred out/demo/predictions.jsonl \
    --report out/demo/report.json --plot out/demo/scores.png
