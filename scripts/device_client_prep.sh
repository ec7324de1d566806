#!/bin/bash
# Prepare, on this machine, what scripts/device_client_capture.sh needs on a lent GPU machine (which reaches no
# package registry and takes 64 MiB a call): .vw/c0 and .vw/c1, vLLM 0.26.0's wheel (the release built for the
# machine's torch 2.11.0+cu130) unpacked, trimmed and xz-compressed in two parts; .vw/d, the wheels of the serving
# dependencies the machine's image lacks; .gpu/, the model folders' config.json, the capture plans
# (scripts/capture_plans) and the lengths they draw on. Then, on the device:
#   run(command="mkdir -p /root/vw && mv .vw/c0 /root/vw/", carry=[".vw/c0"])
#   run(command="mv .vw/c1 /root/vw/", carry=[".vw/c1"])
#   run(command="BUDGET=560 bash scripts/device_client_capture.sh", carry=[".gpu", ".vw/d"])
# each call made within the machine's 30 s idle window of the one before.
set -eu
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
PLAT="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
grep -qx '/.vw/' .git/info/exclude 2>/dev/null || printf '/.vw/\n/.gpu/\n' >> .git/info/exclude
WORK=$(mktemp -d)
python3 -m pip download -q --no-deps $PLAT -d $WORK vllm==0.26.0
mkdir -p $WORK/site && (cd $WORK/site && python3 -m zipfile -e $WORK/vllm-0.26.0-*.whl .)
# not needed on a Hopper card serving dense or MoE models in bf16: FA2 (Hopper uses FA3), the Blackwell FMHA and
# DeepGEMM headers (fp8 JIT), the other Pythons' DeepGEMM builds, the Rust front end (off by default)
rm -f $WORK/site/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so $WORK/site/vllm/vllm-rs
rm -rf $WORK/site/vllm/third_party/fmha_sm100 $WORK/site/vllm/third_party/deep_gemm/include
rm -f $WORK/site/vllm/third_party/deep_gemm/_C.cpython-31[0134]-*.so
mkdir -p .vw/d && (cd $WORK/site && tar cf - . | xz -9 -T0 > $WORK/vllm.tar.xz) && split -b 56000000 -d -a 1 $WORK/vllm.tar.xz .vw/c
# the serving dependencies the image lacks (its package list: /work/.library/device/KINDS.md), at the versions
# pip resolved for vLLM 0.26.0 on 2026-11-30; xgrammar (imported at start-up) with apache-tvm-ffi
python3 -m pip download -q --no-deps $PLAT -d .vw/d agent-detector==2.0.0 annotated-types==0.8.0 anthropic==2.14.0 \
  astor==0.8.1 blake3==1.0.11 cachetools==8.0.2 cbor2==6.3.0 cffi==2.1.1 depyf==0.20.0 detect-installer==0.2.1 \
  dill==0.4.1 dnspython==2.9.2 docstring-parser==0.18.0 email-validator==2.4.0 fastapi==0.136.3 fastapi-cli==0.0.34 \
  fastapi-cloud-cli==0.28.0 fastar==0.12.0 googleapis-common-protos==1.76.0 httpcore2==2.16.2 httptools==0.9.0 \
  httpx2==2.16.2 ijson==3.6.0 interegular==0.3.3 jiter==0.19.0 jmespath==1.1.0 jsonschema==4.26.0 \
  jsonschema-specifications==2025.9.1 lark==1.2.2 llguidance==1.7.6 lm-format-enforcer==0.11.3 mcp==2.3.0 \
  mcp-types==2.3.0 mistral-common==1.13.1 model-hosting-container-standards==0.1.16 msgspec==0.23.0 openai==3.57.0 \
  openai-harmony==0.0.8 opentelemetry-api==1.45.2 opentelemetry-exporter-http-transport==0.66b2 \
  opentelemetry-exporter-otlp==1.45.2 opentelemetry-exporter-otlp-common==0.66b2 \
  opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-otlp-proto-grpc==1.45.2 \
  opentelemetry-exporter-otlp-proto-http==1.45.2 opentelemetry-proto==1.45.2 opentelemetry-sdk==1.45.2 \
  opentelemetry-semantic-conventions==0.66b2 opentelemetry-semantic-conventions-ai==0.5.1 outlines-core==0.2.14 \
  partial-json-parser==0.2.1.1.post7 prometheus-fastapi-instrumentator==8.1.0 pybase64==1.5.1 pycountry==26.2.16 \
  pycparser==3.12 pydantic==2.14.4 pydantic-core==2.50.5 pydantic-extra-types==2.11.1 pydantic-settings==2.16.3 \
  pyjwt==2.15.1 python-dotenv==1.2.4 python-json-logger==4.2.0 python-multipart==0.0.34 pyzmq==27.3.0 \
  referencing==0.37.0 rich-toolkit==0.20.6 rignore==0.8.1 rpds-py==2026.9.1 sentry-sdk==2.75.0 setproctitle==1.3.8 \
  sniffio==1.3.1 sse-starlette==3.7.0 starlette==1.10.0 supervisor==4.3.0 truststore==0.10.5 \
  typing-inspection==0.4.5 uvicorn==0.54.0 watchfiles==1.3.0 websockets==17.4 xgrammar==0.2.9 \
  apache-tvm-ffi==0.1.15.post2
mkdir -p .gpu/m-llama .gpu/m-mistral
cp tests/data/gpu_runs/h100-llama-3.1-8b/config.json .gpu/m-llama/config.json
python3 - <<'PY'
import json
from transformers import MistralConfig
facts = json.load(open("llmsched/hardware/hub_models.json"))["models"]["mistralai/Mistral-Small-24B-Instruct-2501"]
kw = {k: v for k, v in facts["config"].items() if k not in ("model_type", "architectures", "torch_dtype")}
config = MistralConfig(**kw, architectures=facts["config"]["architectures"], torch_dtype="bfloat16",
                       bos_token_id=1, eos_token_id=2, rms_norm_eps=1e-5)
config.rope_parameters = {"rope_theta": 100000000.0, "rope_type": "default"}  # the model's own (timing: none)
config.save_pretrained(".gpu/m-mistral")
PY
cp scripts/capture_plans/llama-3.1-8b.json .gpu/plan-llama.json
cp scripts/capture_plans/mistral-small-24b.json .gpu/plan-mistral.json
cp $SHARED/data/ground_truth/rtxpro6000-llama-3.1-8b/requests.jsonl .gpu/sharegpt-llama.jsonl
rm -rf $WORK
du -sh .vw/c0 .vw/c1 .vw/d .gpu
