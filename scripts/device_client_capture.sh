#!/bin/bash
# The device-side runner of our client-side GPU captures (tests/data/gpu_runs/README.md): `vllm serve` (random
# weights on a model's own config.json, vllm serve's defaults otherwise) driven by `vllm bench serve
# --save-detailed`, with the API server's and the engine core's stamps of every request (scripts/client_capture.py).
# The lent machine reaches no package registry and takes 64 MiB a call: scripts/device_client_prep.sh makes, here,
# vLLM 0.26.0 (the release pinned to its torch 2.11.0+cu130) as a trimmed wheel tree in an xz tar split in two
# (.vw/c0, .vw/c1: no FA2 library, Hopper uses FA3; no Blackwell FMHA or DeepGEMM headers; no Rust front end, off
# by default), the serving dependencies the image lacks as wheels (.vw/d: fastapi, uvicorn, openai, pydantic,
# xgrammar, ...) and .gpu/ (the model folders' config.json, the plans of scripts/capture_plans, the lengths they
# draw on); the 131,072-token tokenizer is written beside each config.json on the device by
# scripts/tekken_tokenizer.py, from the mistral_common wheel. Two calls move c0 and c1 to /root/vw
# (`mkdir -p /root/vw && mv .vw/c0 /root/vw/`, then c1), each within the machine's 30 s idle window, then:
#   run(command="BUDGET=560 bash scripts/device_client_capture.sh", carry=[".gpu", ".vw/d"])
# A rerun on the same warm machine skips the unpacking. Runs come back as $OUT/runs.tgz after each model, and the
# capture's work folders can be fetched with a further call (`tar czf $OUT/work.tgz -C /tmp client_capture_*`)
# for `client_capture.py --rebuild` if a run stops early.
set -u
START=$(date +%s); LOG=$OUT/log.txt; BUDGET=${BUDGET:-500}
el() { echo $(( $(date +%s) - START )); }
left() { echo $(( BUDGET - $(el) )); }
{
echo "== $(date -u) start"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
mkdir -p /tmp/site /root/runs
[ -d /tmp/site/vllm ] || cat /root/vw/c0 /root/vw/c1 | python3 -c "import sys,tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site')"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .vw/d/*.whl 2>&1 | tail -3
python3 scripts/patch_vllm_flashinfer.py /tmp/site
echo "== unpacked at $(el) s"
} >> $LOG 2>&1
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
for m in m-llama m-mistral; do python3 scripts/tekken_tokenizer.py --out .gpu/$m >> $LOG 2>&1; done
python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)
import vllm.entrypoints.openai.api_server, vllm.benchmarks.serve, vllm.v1.request; print('serve imports ok')" \
    >> $LOG 2>&1 || { tail -5 $LOG; exit 1; }
capture() {  # name model-folder hub-id plan seconds
  local name=$1 model=$2 hub=$3 plan=$4 limit=$5
  echo "== $name at $(el) s (limit $limit s)" >> $LOG
  timeout -k 10 $(( limit + 20 )) python3 scripts/client_capture.py --engine gpu --model-dir .gpu/$model \
      --model-name $hub --plan .gpu/$plan --out /root/runs/$name --deadline $limit --warmups 4 \
      --start-timeout $(( limit - 20 )) >> $LOG 2>&1
  local rc=$?; pkill -9 -f EngineCore; pkill -9 -f api_server; sleep 3
  tar czf $OUT/runs.tgz -C /root/runs . ; echo "== $name rc=$rc at $(el) s" >> $LOG
  nvidia-smi --query-gpu=memory.used --format=csv,noheader >> $LOG
}
L=$(left); [ $L -gt 150 ] && capture h200-llama-3.1-8b-serve m-llama meta-llama/Llama-3.1-8B plan-llama.json \
    $(( L > 400 ? L - 190 : L - 10 ))
L=$(left); [ $L -gt 150 ] && capture h200-mistral-small-24b-serve m-mistral mistralai/Mistral-Small-24B-Instruct-2501 \
    plan-mistral.json $(( L - 10 ))
echo "== end at $(el) s" >> $LOG
