"""vLLM's KV cache groups of a model with sliding-window or chunked-local attention layers (its hybrid KV cache
manager), and the pool size they give.

What vLLM 0.32 does (vllm/v1/core/kv_cache_utils.py, single_type_kv_cache_manager.py, kv_cache_manager.py,
kv_cache_interface.py), for a model whose layers all have one page size (K and V of ``block_size`` tokens of one
layer; true of every model here: sliding and full layers share their heads):

* **Grouping** (``_get_kv_cache_groups_uniform_page_size``): layers are bucketed by spec (full attention; sliding
  window ``w``; chunked local attention ``c``). The group size is the smallest bucket's layer count, or the largest's
  where that is under 1.5 times the smallest; each bucket splits into ``ceil(layers / group size)`` groups (the last
  padded). gpt-oss-20b: 12 sliding + 12 full -> 2 groups of 12; Gemma-3-27B: 52 sliding + 10 full -> 6 sliding
  groups and 1 full group of 10 (8 padding layers); Llama-4 Scout: 36 chunked + 12 full -> 3 + 1 groups of 12. A
  model whose layers are all one spec (all full; all sliding, as Mistral-7B-v0.1) is one group of every layer.
* **Pool** (``get_kv_cache_config_from_groups``): one block pool every group draws from; a block holds one page of
  each layer of a group, so ``num_blocks = available KV memory // (group size x page)``. With all layers full
  attention that is today's ``memory // (layers x page)``; a hybrid model's block is smaller, and there are
  ``layers / group size`` times as many (gpt-oss 2x, Gemma-3-27B 6.2x, Llama-4 4x).
* **Blocks a request holds**, per group, after ``allocate_slots`` for ``t`` tokens when ``c`` were computed (``B``
  the block size): a full-attention group ``ceil(t / B)``; a sliding or chunked group ``ceil(t / B)`` less the
  whole blocks before the tokens the next query can see, which ``remove_skipped_blocks(c)`` freed (nulls in its
  block table): ``max(0, c - w + 1) // B`` for a sliding window, ``(c // c_size) * c_size // B`` for chunked local
  attention. The freeing happens at the request's next allocation (every scheduled step of a running request),
  before the new blocks are counted, so a step can free more than it takes.
* **Admission** (``get_num_blocks_to_allocate(apply_admission_cap=True)`` behind ``scheduler_reserve_full_isl``): a
  waiting request's whole-sequence check counts a windowed group at most
  ``max_admission_blocks_per_request``: ``ceil(min(w - 1 + in_flight, max_model_len) / B) + 1`` (sliding),
  ``ceil(min(c + in_flight, max_model_len) / B)`` (chunked), ``in_flight`` = ``max_num_batched_tokens`` (one batch
  in flight: synchronous scheduling, as llmsched's replica steps its KV). vLLM's async scheduling (its GPU default)
  reserves for two batches and frees on the processed tokens (``num_computed_tokens - num_in_flight_tokens``), a
  step later: up to a chunk's blocks more per windowed group while a prompt is chunked, one while decoding; not
  modelled.
* **Prefix-cache hits** (``find_longest_cache_hit``): a full group hits its longest cached prefix; a sliding group
  needs only the ``ceil((w - 1) / B)`` blocks before the hit's end cached; a chunked group the blocks of the
  current chunk. llmsched's prefix cache (engine/prefix_cache.py) is not modelled per group: a run with a prefix
  cache (or KV tiers, or a prefill instance's KV) keeps the all-full-attention accounting and pool (as vLLM's
  ``--disable-hybrid-kv-cache-manager``), and says so in its KV cache's source.
"""
from __future__ import annotations

from dataclasses import dataclass

from .models import ModelSpec


@dataclass(frozen=True)
class KVGroups:
    """A model's KV cache groups as vLLM forms them: ``full`` groups of full attention and ``local`` groups of
    sliding-window (``chunked`` False) or chunked-local attention over ``window`` tokens, each of ``group_layers``
    layers (padding included)."""

    full: int
    local: int
    window: int
    chunked: bool
    group_layers: int
    layers: int

    @property
    def hybrid(self) -> bool:
        """Whether any group frees blocks outside its window (else the accounting is the all-full one)."""
        return self.local > 0

    def block_bytes(self, spec: ModelSpec, block_size: int) -> int:
        """Bytes of one block per GPU: a page of each of a group's layers (vLLM's ``bytes_per_block``)."""
        per_layer_token = spec.kv_bytes_per_token_per_gpu // spec.layers
        return block_size * per_layer_token * self.group_layers

    def describe(self) -> str:
        kind = f"chunked local attention {self.window}" if self.chunked else f"sliding window {self.window}"
        return (f"vLLM's hybrid KV cache groups: {self.full} full-attention and {self.local} {kind} group(s) of "
                f"{self.group_layers} layers")


def kv_groups(spec: ModelSpec) -> KVGroups | None:
    """``spec``'s groups (see the module docstring), or None for a model of full-attention layers only."""
    if not spec.sliding_window or not spec.sliding_layers:
        return None
    local_layers = spec.sliding_layers
    full_layers = spec.layers - local_layers
    buckets = [n for n in (full_layers, local_layers) if n]
    size = min(buckets)
    if max(buckets) < 1.5 * size:
        size = max(buckets)
    return KVGroups(full=-(-full_layers // size), local=-(-local_layers // size), window=spec.sliding_window,
                    chunked=spec.chunked_local, group_layers=size, layers=spec.layers)
