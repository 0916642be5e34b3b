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
# Main job on the embedded default (a committed PoseBusters complex):
rm -rf out/demo
.venv/bin/misi-agent render misi_agent/data/structures/6yqw.cif.gz --ligand 82I --out out/demo
ls out/demo
