"""vLLM's default step limits for a GPU: ``max_num_batched_tokens`` and ``max_num_seqs`` where a run does not give them.

vLLM picks them by the card (vLLM 0.32.0, vllm/engine/arg_utils.py ``EngineArgs.get_batch_defaults``, applied by
``_set_default_max_num_seqs_and_batched_tokens_args`` to a flag left unset), by the device's total memory
(``current_platform.get_device_total_memory()``) and name, and by the usage context: ``vllm serve``
(``OPENAI_API_SERVER``) or the offline ``LLM`` class (``LLM_CLASS``):

=============================================  ===============  ==============  ========
card                                           serve tokens     LLM tokens      seqs
=============================================  ===============  ==============  ========
>= 160 GiB (B200, B300, MI300X)                16384            16384           1024
>= 70 GiB, "a100" not in its name (H100, H200,  8192            16384           1024
H20, A800, RTX PRO 6000)
any other (A100, cards under 70 GiB)           2048             8192            256
=============================================  ===============  ==============  ========

History (vLLM pull requests, by merge date): #12369 (January 2025) raised H100/H200's by name; #17073 (April 2025)
chose by memory, >= 70 GiB; #17885 (May 2025) kept the A100 at the small budget, since 8192 tokens cost it 36% of
Llama-70B TP=2 throughput: the 70 GiB rule as it stands holds from v0.9.0 (May 2025) on. #51726 (2026) added the
>= 160 GiB class for B200/B300, which by memory alone also takes the MI300X (192 GB; vLLM issue #53961, fixes that
keep ROCm out still open): vLLM 0.32.0's, which this follows. ``world_size`` (TP x PP) scales only the CPU
platform's defaults, so a GPU's do not depend on it; TPUs have their own. Doubled under ``--performance-mode
throughput`` (not modelled here).

Memory: vLLM asks NVML on CUDA (nvidia-smi's figure, e.g. 81,559 MiB on an H100 SXM); we have the total CUDA
reports (:attr:`GPUSpec.visible_bytes`, 81,090 MiB there) or the datasheet's. No preset lies within 8 GiB of a
threshold under any of the three figures (tests/test_gpu_defaults.py), so they all pick the same class.

**The run's default** (:func:`run_batch_defaults`) is ``vllm serve``'s on the two large classes: the server our
users benchmark. On the third class llmsched keeps the limits it has always had (``engine/limits.py``: 8192 tokens,
256 sequences, vLLM's ``LLM``-class figures for such cards), where ``vllm serve`` gives 2048 tokens: changing it
would move every run on the default GPU (an A100); the rule for it is :data:`SMALL_CARD_CONTEXT`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.limits import MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS
from .gpus import GiB, GPUSpec, gpu as gpu_preset

SERVE, OFFLINE = "serve", "offline"    # vLLM's UsageContext.OPENAI_API_SERVER, UsageContext.LLM_CLASS
LARGEST_FROM = 160 * GiB
LARGE_FROM = 70 * GiB
# where the run's default on vLLM's third class comes from: llmsched's declared limits (OFFLINE's figures), not
# SERVE's 2048 tokens (module docstring); SERVE here would make every GPU's default vllm serve's
SMALL_CARD_CONTEXT = OFFLINE
# the limits of every run on every card before they followed the card (engine/limits.py's declarations): a
# reproduction whose figures were made with them pins them
FORMER_DEFAULTS = {"max_num_seqs": MAX_NUM_SEQS.default, "max_num_batched_tokens": MAX_NUM_BATCHED_TOKENS.default}


@dataclass(frozen=True)
class BatchDefaults:
    max_num_batched_tokens: int
    max_num_seqs: int


def large_card(gpu: GPUSpec | str) -> bool:
    """Whether vLLM gives ``gpu`` its larger defaults (>= 70 GiB and not an A100, or >= 160 GiB)."""
    device = gpu_preset(gpu)
    return device.visible_bytes >= LARGEST_FROM or (device.visible_bytes >= LARGE_FROM and
                                                    "a100" not in device.name.lower())


def vllm_batch_defaults(gpu: GPUSpec | str, context: str = SERVE) -> BatchDefaults:
    """vLLM's defaults on ``gpu`` in ``context`` (``serve`` or ``offline``), as ``get_batch_defaults`` picks them."""
    if context not in (SERVE, OFFLINE):
        raise ValueError(f"context must be {SERVE!r} or {OFFLINE!r}, got {context!r}")
    device = gpu_preset(gpu)
    if device.visible_bytes >= LARGEST_FROM:
        return BatchDefaults(16384, 1024)
    if large_card(device):
        return BatchDefaults(8192 if context == SERVE else 16384, 1024)
    return BatchDefaults(2048 if context == SERVE else 8192, 256)


def run_batch_defaults(gpu: GPUSpec | str) -> BatchDefaults:
    """A run's limits on ``gpu`` where it gives none: ``vllm serve``'s on vLLM's two large classes, on the third
    those of :data:`SMALL_CARD_CONTEXT` (the module docstring says why; engine/limits.py declares the same
    figures, and tests/test_gpu_defaults.py holds them equal)."""
    return vllm_batch_defaults(gpu, SERVE if large_card(gpu) else SMALL_CARD_CONTEXT)


class GpuDefault(int):
    """A limit the run did not give: the value for its GPU, marked so that a run moved to another GPU (a fleet's
    pool, a plan's candidate) takes that GPU's instead (``run_config.resolve_gpu_defaults``). It is an int
    everywhere else, and written as one."""

    def __repr__(self) -> str:
        return int.__repr__(self)

    def __reduce__(self):
        return GpuDefault, (int(self),)


LIMITS = ("max_num_batched_tokens", "max_num_seqs")


def on_gpu(values: dict, gpu: GPUSpec | str) -> dict:
    """``values``' limits (``LIMITS``) for ``gpu``: a :class:`GpuDefault` becomes ``gpu``'s; one given stays."""
    if not any(isinstance(values.get(name), GpuDefault) for name in LIMITS):
        return {}
    try:
        defaults = run_batch_defaults(gpu)
    except ValueError:      # an unknown GPU: the run that reads it says so, naming the option
        return {}
    return {name: GpuDefault(getattr(defaults, name)) for name in LIMITS if isinstance(values.get(name), GpuDefault)}
