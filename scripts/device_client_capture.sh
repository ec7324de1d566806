#!/bin/bash
# The device-side runner of our client-side GPU captures (tests/data/gpu_runs/README.md): `vllm serve` (random
# weights on a model's own config.json, vllm serve's defaults otherwise) driven by `vllm bench serve
# --save-detailed`, with the API server's and the engine core's stamps of every request (scripts/client_capture.py).
# The lent machine reaches no package registry and takes 64 MiB a call, so vLLM 0.26.0 (the release pinned to its
# torch 2.11.0+cu130) travels as a trimmed wheel tree (no FA2 library: Hopper uses FA3; no Blackwell FMHA or
# DeepGEMM headers; no Rust front end, which is off by default) in an xz tar split in two, moved to /root/vw by two
# calls before this one (`mkdir -p /root/vw && mv .vw/c0 /root/vw/`, then c1), and the serving dependencies the
# image lacks (fastapi, uvicorn, openai, pydantic, ...) as wheels in .vw/d:
#   run(command="BUDGET=500 bash scripts/device_client_capture.sh", carry=[".gpu", ".vw/d"])
# .gpu/ holds the model folders (m-llama, m-mistral: the model's config.json; the 131,072-token tokenizer is written
# beside it here by scripts/tekken_tokenizer.py, from the mistral_common wheel), the
# benches (plan-*.json) and the lengths they draw on. Runs come back as $OUT/runs.tgz after each model.
set -u
START=$(date +%s); LOG=$OUT/log.txt; BUDGET=${BUDGET:-500}
el() { echo $(( $(date +%s) - START )); }
left() { echo $(( BUDGET - $(el) )); }
{
echo "== $(date -u) start"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
mkdir -p /tmp/site /root/runs
[ -d /tmp/site/vllm ] || cat /root/vw/c0 /root/vw/c1 | python3 -c "import sys,tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site')"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .vw/d/*.whl 2>&1 | tail -3
python3 - <<'PY'
p = '/tmp/site/vllm/v1/sample/ops/topk_topp_sampler.py'
s = open(p).read()
i = s.index('def flashinfer_sampler_supported(')
j = s.index(':\n', i) + 2
s = s[:j] + '    try:\n        import flashinfer  # noqa: F401\n    except ImportError:\n        return False\n' + s[j:]
open(p, 'w').write(s)
print('patched flashinfer_sampler_supported')
PY
echo "== unpacked at $(el) s"
} >> $LOG 2>&1
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
for m in m-llama m-mistral; do python3 scripts/tekken_tokenizer.py --out .gpu/$m >> $LOG 2>&1; done
python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__); import vllm.entrypoints.openai.api_server, vllm.benchmarks.serve; import vllm.v1.request; print('serve imports ok')" >> $LOG 2>&1 || { tail -5 $LOG; exit 1; }
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
L=$(left); [ $L -gt 150 ] && capture h200-mistral-small-24b-serve m-mistral mistralai/Mistral-Small-24B-Instruct-2501 plan-mistral.json $(( L - 10 ))
echo "== end at $(el) s" >> $LOG
