"""vLLM v1's engine around any GPU batch-time model: what the engine adds to, or hides of, the GPU's step time.

The GPU model (``roofline`` by default, any registered kind) says how long the GPU computes a batch. vLLM v1
changes that time in three ways, each from vLLM's source (v0.32.0, read in this project's venv) or a measurement:

* **CUDA graphs pad the batch.** A step of ``n`` tokens with ``n`` at most the largest capture size runs the
  captured graph of the smallest size >= ``n`` (full graphs for decode-only steps, piecewise graphs for mixed ones,
  ``cudagraph_mode`` FULL_AND_PIECEWISE), so the GPU computes the padded token count; a larger step runs without a
  graph. The sizes are vLLM's default (vllm/config/vllm.py, ``_set_cudagraph_sizes``): 1, 2, 4, then multiples of 8
  below 256, then multiples of 16, up to ``min(2 · max_num_seqs, 512)`` (1,024 on data-centre Blackwell) and at
  most ``max_num_batched_tokens``, which is added when it fits; the H200 runs' meta.json lists exactly these.
  The padding rows are dummy decodes of one KV token (the model runner pads ``input_ids`` and positions; logits
  are computed for the real rows only, so the LM head is not padded: a dummy row adds one row there, a
  negligible over-count).
* **The host's work per step overlaps the GPU's** with async scheduling (vLLM's default, and on in every run
  here): the engine schedules and prepares step N+1 while the GPU runs step N (vllm PR #23569, "fully overlap
  model execution"), so a step takes ``max(gpu, cpu)``; without it (``async_scheduling=False``) ``gpu + cpu``.
  ``cpu = cpu_step + cpu_per_seq · rows``. ``cpu_per_seq`` = 11 µs is measured: vLLM's own ``schedule()`` plus
  ``update_from_output()`` per running request, 0.73/1.42/2.82 ms at 64/128/256 decoding requests
  (benchmarks/bench_vllm_overhead.py, vLLM 0.32.0 on this project's 2-core machine, docs/vllm.md). ``cpu_step``
  (the engine loop, input preparation and output serialisation that do not grow with the batch) is not measured
  and defaults to 0: at GPU steps of 4 ms and more it is hidden anyway.
* **Async scheduling admits a step late.** With two batches in flight (vllm/v1/engine/core.py
  ``step_with_batch_queue``) the engine core plans step N+1 before it waits for step N, and reads new requests
  only after step N's outputs: a request arriving during step N is queued (its ``queued_ts``) at N's end and first
  scheduled in step N+2. The H200 runs show it: ``scheduled_ts`` is 0.01 ms after ``queued_ts`` for every
  request, and a request's first token comes a whole step after the step it was queued at. ``async_admission``
  tells the simulator so (sim/simulator.py): such a request waits for the step in flight, is queued at its end
  and joins after the next step was planned.
* **The GPU model's own host terms are the engine's**: the roofline's ``step_overhead`` (2 ms of "scheduling,
  input preparation, sampling", a documented default, not a vLLM figure) is replaced by the terms above, so the
  inner model is built with ``step_overhead=0``.

The KV cache vLLM sizes (hardware/vllm_memory.py) and data-parallel lockstep (sim/dp_lockstep.py) are the
other engine terms; they are not step times.
"""
from __future__ import annotations

import math
from bisect import bisect_left

from .base import Batch, BatchTimeModel

CPU_PER_SEQ = 11e-6       # s per running request: vLLM's schedule() + update_from_output(), measured (docstring)
DEFAULT_MAX_CAPTURE = 512  # vLLM's default largest capture size (1024 on data-centre Blackwell, capability 10.x)


def cudagraph_capture_sizes(max_num_seqs: int, max_num_batched_tokens: int,
                            max_capture: int = DEFAULT_MAX_CAPTURE) -> tuple[int, ...]:
    """vLLM's default CUDA-graph capture sizes (vllm/config/vllm.py ``_set_cudagraph_sizes``, no speculation)."""
    if min(max_num_seqs, max_num_batched_tokens, max_capture) < 1:
        raise ValueError("max_num_seqs, max_num_batched_tokens and max_capture must be >= 1")
    top = min(2 * max_num_seqs, max_capture, max_num_batched_tokens)
    sizes = {n for n in (1, 2, 4) if n <= top}
    sizes.update(range(8, min(top + 1, 256), 8))
    sizes.update(range(256, top + 1, 16))
    if max_num_batched_tokens <= top:
        sizes.add(max_num_batched_tokens)
    if max_num_seqs <= top:
        sizes.add(max_num_seqs)
    return tuple(sorted(sizes))


class VLLMV1BatchTime(BatchTimeModel):
    """``gpu_model``'s step time for the CUDA-graph padded batch, overlapped (or not) with the host's work."""

    name = "vllm-v1"

    def __init__(self, gpu_model: BatchTimeModel, *, capture_sizes: tuple[int, ...] | list[int] = (),
                 async_scheduling: bool = True, cpu_step: float = 0.0, cpu_per_seq: float = CPU_PER_SEQ,
                 source: str = ""):
        if not isinstance(gpu_model, BatchTimeModel):
            raise ValueError(f"vllm-v1 needs a GPU batch-time model, got {type(gpu_model).__name__}")
        sizes = sorted({int(s) for s in capture_sizes})
        if sizes and sizes[0] < 1:
            raise ValueError(f"vllm-v1: CUDA-graph capture sizes must be >= 1, got {sizes[0]}")
        for label, value in (("cpu_step", cpu_step), ("cpu_per_seq", cpu_per_seq)):
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"vllm-v1: {label} must be a number of seconds >= 0, got {value!r}")
        self.gpu_model = gpu_model
        self.capture_sizes = tuple(sizes)
        self.async_scheduling = self.async_admission = bool(async_scheduling)
        self.cpu_step, self.cpu_per_seq = float(cpu_step), float(cpu_per_seq)
        self.source = source
        self.decode_sum_only = gpu_model.decode_sum_only
        self.wake = gpu_model.wake
        self._max_graph = sizes[-1] if sizes else 0
        # what every step reads, in one tuple (a compiled step unpacks it once; each attribute of this plain class is
        # a dictionary lookup)
        self._hot = (self._max_graph, self.capture_sizes, self.cpu_step, self.cpu_per_seq, self.async_scheduling,
                     gpu_model)

    def padding(self, tokens: int) -> int:
        """Dummy tokens the step's CUDA graph adds to ``tokens`` (0 above the largest capture size)."""
        if tokens > self._max_graph or tokens == 0:
            return 0
        sizes = self.capture_sizes
        return sizes[bisect_left(sizes, tokens)] - tokens

    def _cycle(self, gpu: float, rows: int) -> float:
        cpu = self.cpu_step + self.cpu_per_seq * rows
        if self.async_scheduling:
            return gpu if gpu > cpu else cpu
        return gpu + cpu

    def step_time(self, batch: Batch) -> float:
        tokens = batch.num_tokens
        if tokens == 0:
            return 0.0
        pad = self.padding(tokens)
        padded = batch if not pad else Batch(batch.prefill_new, batch.prefill_ctx, batch.decode_ctx + [1] * pad)
        return self._cycle(self.gpu_model.step_time(padded), len(batch.decode_ctx) + len(batch.prefill_new))

    def decode_sum_time(self, num_decodes: int, context_sum: int) -> float:
        """``step_time`` of ``num_decodes`` decodes over ``context_sum`` tokens (``padding`` and ``_cycle`` written
        out: every decode step of a run comes here)."""
        if num_decodes == 0:
            return 0.0
        max_graph, sizes, cpu_step, cpu_per_seq, overlap, gpu_model = self._hot
        pad = sizes[bisect_left(sizes, num_decodes)] - num_decodes if num_decodes <= max_graph else 0
        gpu = gpu_model.decode_sum_time(num_decodes + pad, context_sum + pad)
        cpu = cpu_step + cpu_per_seq * num_decodes
        if overlap:
            return gpu if gpu > cpu else cpu
        return gpu + cpu

    def sum_step_time(self, prefill_new, prefill_ctx, num_decodes: int, context_sum: int) -> float:
        """``step_time`` from the batch's sums (``padding`` and ``_cycle`` written out, as in decode_sum_time)."""
        tokens = sum(prefill_new) + num_decodes
        if tokens == 0:
            return 0.0
        max_graph, sizes, cpu_step, cpu_per_seq, overlap, gpu_model = self._hot
        pad = sizes[bisect_left(sizes, tokens)] - tokens if tokens <= max_graph else 0
        gpu = gpu_model.sum_step_time(prefill_new, prefill_ctx, num_decodes + pad,
                                      (context_sum if num_decodes else 0) + pad)
        cpu = cpu_step + cpu_per_seq * (num_decodes + len(prefill_new))
        if overlap:
            return gpu if gpu > cpu else cpu
        return gpu + cpu

    def describe(self) -> dict:
        inner = self.gpu_model.describe()
        return {"name": self.name, "model": inner.get("model"), "gpu": inner.get("gpu"), "gpu_model": inner,
                "capture_sizes": list(self.capture_sizes), "async_scheduling": self.async_scheduling,
                "cpu_step": self.cpu_step, "cpu_per_seq": self.cpu_per_seq, "source": self.source}
