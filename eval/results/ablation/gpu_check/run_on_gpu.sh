# The command run on the GPU machine (repository root; $OUT is collected). Carry: eval/work/gpu_check, .whl
# (.whl: jsonschema 4.26.0, jsonschema-specifications 2025.9.1, referencing 0.37.0, rpds-py 2026.9.1 wheels).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
python3 -c "import torch, transformers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__, torch.cuda.get_device_name())" | tee $OUT/versions.txt
python3 eval/finetune.py --config eval/work/gpu_check/finetune_lora.yaml --flavour tools --out /tmp/lora --no-progress 2>&1 | tee $OUT/lora.log
python3 eval/finetune.py --config eval/work/gpu_check/finetune_full.yaml --flavour direct --out /tmp/full --no-progress 2>&1 | tee $OUT/full.log
cp /tmp/lora/training_log.json $OUT/lora_training_log.json; cp /tmp/lora/loss.png $OUT/lora_loss.png
cp /tmp/full/training_log.json $OUT/full_training_log.json
ls -la /tmp/lora | tee -a $OUT/reload.log
python3 eval/results/ablation/gpu_check/reload.py /tmp/lora 2>&1 | tee -a $OUT/reload.log
