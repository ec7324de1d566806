"""Hardware presets: models, GPUs and the KV-cache memory they leave."""
from .gpus import GPUS, GPUSpec, gpu
from .memory import (default_activation_reserve, kv_bytes_per_token, kv_capacity_blocks,
                     kv_capacity_tokens)
from .models import MODELS, ModelSpec, model

__all__ = ["GPUS", "GPUSpec", "gpu", "MODELS", "ModelSpec", "model", "kv_bytes_per_token",
           "kv_capacity_tokens", "kv_capacity_blocks", "default_activation_reserve"]
