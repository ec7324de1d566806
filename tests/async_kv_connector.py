"""A KV connector that loads asynchronously on vLLM's CPU build, so the tests can drive vLLM's async-load path
(``WAITING_FOR_REMOTE_KVS``, ``kv_holding_waiting``, ``finished_recving``) with llmsched's plug-in beside it, as
NIXL's decode side and the offloading connectors drive it on a GPU, none of which runs here.

It reads ``ExampleConnector``'s folder (a producer stores prompts there) but answers a hit as NIXL does: the
request is parked (``load_kv_async``) with its blocks allocated, the worker copies the KV in during the next step
and reports the load finished, and the scheduler runs the request from there. A test double of the transport only:
the scheduler, the block manager and the model are vLLM's own.

With ``kv_connector_extra_config={"whole_prompt": true}`` a hit counts every prompt token, as NIXL's decode side
counts a remote prefill (vLLM then recomputes the last one); the folder holds whole blocks only, so the tokens past
them are not loaded and the outputs are not the prompt's: a test of the scheduling path, not of the KV.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import safetensors.torch
import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata
from vllm.distributed.kv_transfer.kv_connector.v1.example_connector import ExampleConnector, align_to_block_size


@dataclass
class AsyncLoads(KVConnectorMetadata):
    loads: list[tuple[str, list[int], list[int]]] = field(default_factory=list)  # request id, tokens, block ids


class AsyncFolderConnector(ExampleConnector):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pending: dict[str, tuple[list[int], list[int]]] = {}
        self._whole = bool(self._kv_transfer_config.get_from_extra_config("whole_prompt", False))
        self._loaded: set[str] = set()

    # --- scheduler side ---
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        n, _ = super().get_num_new_matched_tokens(request, num_computed_tokens)
        if n and self._whole:
            n = len(request.prompt_token_ids) - num_computed_tokens
        return n, bool(n)

    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        if num_external_tokens > 0:
            tokens = list(request.prompt_token_ids)[:align_to_block_size(len(request.prompt_token_ids) - 1,
                                                                         self._block_size)]
            self._pending[request.request_id] = (tokens, list(blocks.get_block_ids()[0]))

    def build_connector_meta(self, scheduler_output):
        meta = AsyncLoads([(rid, tokens, blocks) for rid, (tokens, blocks) in self._pending.items()])
        self._pending.clear()
        return meta

    # --- worker side ---
    def start_load_kv(self, forward_context, **kwargs):
        meta = self._get_connector_metadata()
        if not isinstance(meta, AsyncLoads):
            return
        for rid, tokens, block_ids in meta.loads:
            slots = torch.arange(len(tokens))
            blocks = torch.tensor(block_ids)[slots // self._block_size]
            offsets = slots % self._block_size
            for name, layer in forward_context.no_compile_layers.items():
                cache = getattr(layer, "kv_cache", None)
                if cache is None:
                    continue
                path = self._generate_filename_debug(name, torch.tensor(tokens), [])
                cache[blocks, :, offsets] = safetensors.torch.load_file(path)["kv_cache"]
            self._loaded.add(rid)

    def wait_for_layer_load(self, layer_name):
        return

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        return

    def get_finished(self, finished_req_ids):
        done, self._loaded = self._loaded, set()
        return None, (done or None)
