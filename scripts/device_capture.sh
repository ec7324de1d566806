#!/bin/bash
# The device-side runner of our real-GPU captures (tests/data/gpu_runs/README.md), as run on the H100 on
# 2026-11-26: `run(command="BUDGET=470 bash scripts/device_capture.sh", carry=[".gpu", ".vw/c3"])` after two calls
# that moved .vw/c1 and .vw/c2 (vLLM 0.26.0's wheel, trimmed of its FA2 library and Blackwell-only headers, as a
# tar.xz split in two; c3 a tar of its missing pure-Python and cp312 dependency wheels) to /root/vw. The lent
# machine reaches no package registry and takes 64 MiB a call; its torch is 2.11.0+cu130, the release vLLM 0.26.0
# pins. .gpu/ holds the models' config.json files and the request files named below (req-llama.jsonl and
# req-moe.jsonl: the shared rtxpro6000 runs' requests.jsonl; mc-conv300.jsonl: the first 300 lines of the Mooncake
# conversation trace). Each run is bounded; the outputs come back as $OUT/runs.tgz, and scripts/gpu_run_meta.py
# turns each into a run folder.
set -u
START=$(date +%s); LOG=$OUT/log.txt; BUDGET=${BUDGET:-520}
el() { echo $(( $(date +%s) - START )); }
{
echo "== $(date -u) start"; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
mkdir -p /root/vw /tmp/site /root/runs && mv .vw/c3 /root/vw/ ; ls -la /root/vw
cat /root/vw/c1 /root/vw/c2 | python3 -c "import sys,tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site')"
mkdir -p /root/vw/deps && python3 -c "import tarfile; tarfile.open('/root/vw/c3').extractall('/root/vw/deps')"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /root/vw/deps/*.whl 2>&1 | tail -3
python3 scripts/patch_vllm_flashinfer.py /tmp/site
echo "== unpacked at $(el) s"
} >> $LOG 2>&1
export PYTHONPATH=/tmp/site HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" >> $LOG 2>&1
mkdir -p .gpu/m-llama .gpu/m-moe && cp .gpu/llama-3.1-8b.json .gpu/m-llama/config.json && cp .gpu/qwen3-30b-a3b.json .gpu/m-moe/config.json
run() {  # name model timeout args...
  local name=$1 model=$2 limit=$3; shift 3
  echo "== $name at $(el) s (limit $limit s)" >> $LOG
  timeout -k 5 $limit python3 scripts/vllm_gpu_replay.py --model-dir .gpu/$model --out /root/runs/$name \
     --max-num-seqs 128 --max-num-batched-tokens 2048 --max-model-len 32768 "$@" >> $LOG 2>&1
  local rc=$?; pkill -9 -f EngineCore; pkill -9 -f vllm_gpu_replay; sleep 2
  tar czf $OUT/runs.tgz -C /root/runs . ; echo "== $name rc=$rc at $(el) s" >> $LOG; nvidia-smi --query-gpu=memory.used --format=csv,noheader >> $LOG; return $rc
}
left() { echo $(( BUDGET - $(el) )); }
run h100-llama-mooncake m-llama 200 --requests .gpu/mc-conv300.jsonl --limit 300 --max-input 4096 --time-scale 0.6 \
    --warmup 16,256,1024,2048
L=$(left); [ $L -gt 150 ] && run h100-qwen3-30b-a3b-warm m-moe $(( L > 220 ? 200 : L - 20 )) --requests .gpu/req-moe.jsonl \
    --warmup 16,48,100,200,300,400,520,700,900,1100,1300,1536,1800,2048
L=$(left); [ $L -gt 120 ] && run h100-llama-3.1-8b m-llama $(( L > 170 ? 150 : L - 20 )) --requests .gpu/req-llama.jsonl \
    --warmup 16,256,1024,2048
L=$(left)
if [ $L -gt 40 ]; then
  echo "== grid at $(el) s" >> $LOG
  timeout $L python3 scripts/gpu_step_grid.py --config .gpu/llama-3.1-8b.json --name llama-3.1-8b \
    --config .gpu/qwen3-30b-a3b.json --name qwen3-30b-a3b --out $OUT/grid.csv --meta $OUT/grid.json --deadline $(( L / 2 )) \
    --stop $(( L - 15 )) >> $LOG 2>&1
fi
echo "== end at $(el) s" >> $LOG
