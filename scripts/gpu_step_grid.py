"""Measure a model's step times on a real GPU over a grid of batch shapes (ground truth for the batch-time model).

Builds the decoder from a Hugging Face ``config.json`` (Llama/Mistral/Qwen2/Qwen3 dense, Qwen3-MoE/Mixtral routed
experts) with random bf16 weights, and times one engine step -- every layer's GEMMs, norms, rotary embedding,
attention, the MoE router and grouped expert GEMMs, the LM head and a greedy sample on the rows that sample -- for
prefill chunks, decode batches and mixed batches, each captured as a CUDA graph (as vLLM captures its decode
steps) and replayed, so what is timed is the GPU's work, not this script's Python. Each shape is also timed with
attention left out (``mode=noattn``), so attention's share can be read off.

What it is not: vLLM. Attention is PyTorch's SDPA (FlashAttention-2 / memory-efficient kernels) over contiguous K/V
rather than vLLM's paged kernels, a chunk over cached context is two SDPA calls (context, then its own causal
block), the decode batch has one context length, new K/V are not written to a cache, and experts run through
``torch._grouped_mm`` (vLLM: a fused Triton MoE kernel). Host work (scheduling, input preparation,
detokenisation) is not in these times; docs/fidelity.md says how they are used.

    python scripts/gpu_step_grid.py --config qwen3-30b-a3b/config.json --name qwen3-30b-a3b --out grid.csv

Needs only PyTorch. ``--dry-run`` runs two tiny layers on the CPU (no graphs) to check the script itself.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

PREFILL = [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
CHUNKS_OVER_CONTEXT = [(512, 1536), (2048, 2048), (2048, 6144)]
DECODE_BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
DECODE_CONTEXTS = [256, 1024, 4096]
MIXED = [(c, b) for c in (128, 1024, 1792) for b in (16, 64, 128) if c + b <= 2048]
MIXED_CONTEXT = 1024
GROUP_ALIGN = 16          # rows of a group in torch._grouped_mm: multiples of 16 (as torchtitan pads them)


class Shape:
    """One step: prefill chunks (new tokens, cached context) and ``decodes`` decodes of ``context`` tokens."""

    def __init__(self, chunks=(), decodes=0, context=0):
        self.chunks, self.decodes, self.context = list(chunks), decodes, context

    @property
    def tokens(self):
        return sum(c for c, _ in self.chunks) + self.decodes

    @property
    def rows(self):
        return len(self.chunks) + self.decodes


class Model:
    """Random-weight decoder with the shapes of ``cfg``, every layer with weights of its own (a layer reusing
    another's could find them in L2 and run faster than the real model)."""

    def __init__(self, cfg: dict, device, dtype, layers: int | None = None):
        self.device, self.dtype = device, dtype
        self.hidden = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads", self.heads)
        self.head_dim = cfg.get("head_dim") or self.hidden // self.heads
        self.layers = layers or cfg["num_hidden_layers"]
        self.vocab = cfg["vocab_size"]
        self.qk_norm = cfg.get("model_type", "") in ("qwen3", "qwen3_moe")
        self.experts = cfg.get("num_experts") or cfg.get("num_local_experts") or 0
        self.top_k = cfg.get("num_experts_per_tok", 0)
        self.ffn = cfg.get("moe_intermediate_size") if self.experts else cfg["intermediate_size"]
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        w = lambda *s: torch.empty(*s, device=device, dtype=dtype).normal_(0, 0.02)
        self.norm = torch.ones(self.hidden, device=device, dtype=dtype)
        self.head_norm = torch.ones(self.head_dim, device=device, dtype=dtype)
        self.weights = []
        for _ in range(self.layers):
            layer = {"qkv": w(q + 2 * kv, self.hidden), "o": w(self.hidden, q)}
            if self.experts:
                layer.update(router=w(self.experts, self.hidden), gate_up=w(self.experts, 2 * self.ffn, self.hidden),
                             down=w(self.experts, self.hidden, self.ffn))
            else:
                layer.update(gate_up=w(2 * self.ffn, self.hidden), down=w(self.hidden, self.ffn))
            self.weights.append(layer)
        self.lm_head = w(self.vocab, self.hidden)
        self.gqa = gqa_supported(device, dtype)

    def mlp(self, x, layer):
        if not self.experts:
            g, u = (x @ layer["gate_up"].t()).chunk(2, dim=-1)
            return (F.silu(g) * u) @ layer["down"].t()
        t = x.shape[0]
        logits = x @ layer["router"].t()
        weights, experts = torch.topk(torch.softmax(logits.float(), dim=-1), self.top_k, dim=-1)
        weights = (weights / weights.sum(-1, keepdim=True)).to(x.dtype)
        flat = experts.reshape(-1)
        counts = torch.zeros(self.experts, device=x.device, dtype=torch.int64).scatter_add_(
            0, flat, torch.ones_like(flat))                    # bincount would sync to size its output
        padded = (counts + GROUP_ALIGN - 1) // GROUP_ALIGN * GROUP_ALIGN
        ends = torch.cumsum(padded, 0)
        starts = ends - padded
        order = torch.argsort(flat, stable=True)
        rank = torch.arange(flat.numel(), device=x.device) - (torch.cumsum(counts, 0) - counts)[flat[order]]
        slot = starts[flat[order]] + rank                      # each (token, expert) pair's row in the groups
        capacity = t * self.top_k + (GROUP_ALIGN - 1) * min(self.experts, t * self.top_k)
        grouped = x.new_zeros(capacity, self.hidden)
        grouped[slot] = x[order // self.top_k]
        offs = ends.to(torch.int32)
        gate_up = grouped_mm(grouped, layer["gate_up"], offs)
        g, u = gate_up.chunk(2, dim=-1)
        down = grouped_mm((F.silu(g) * u).contiguous(), layer["down"], offs)
        out = torch.zeros_like(x)
        contrib = down[slot] * weights.reshape(-1)[order].unsqueeze(-1)
        out.index_add_(0, order // self.top_k, contrib)
        return out

    def attention(self, q, k, v, shape: Shape, kv_cache):
        """q, k, v: [tokens, heads*head_dim] for this step's tokens, prefill chunks first then decodes."""
        hd, out, pos = self.head_dim, [], 0
        group = self.heads // self.kv_heads
        for c, m in shape.chunks:
            qc = q[pos:pos + c].view(c, self.heads, hd).transpose(0, 1).unsqueeze(0)
            kc = k[pos:pos + c].view(c, self.kv_heads, hd).transpose(0, 1).unsqueeze(0)
            vc = v[pos:pos + c].view(c, self.kv_heads, hd).transpose(0, 1).unsqueeze(0)
            o = sdpa(qc, kc, vc, True, self.gqa)
            if m:
                o = o + sdpa(qc, kv_cache[0][:1, :, :m], kv_cache[1][:1, :, :m], False, self.gqa)
            out.append(o.squeeze(0).transpose(0, 1).reshape(c, -1))
            pos += c
        if shape.decodes:
            b = shape.decodes
            # GQA decode: the group's query heads ride as the query-length axis of their one K/V head
            qd = q[pos:pos + b].view(b, self.kv_heads, group, hd)
            kk, vv = kv_cache[0][:b, :, :shape.context], kv_cache[1][:b, :, :shape.context]
            out.append(F.scaled_dot_product_attention(qd, kk, vv).reshape(b, -1))
        return torch.cat(out) if len(out) > 1 else out[0]

    def step(self, x, cos, sin, shape: Shape, kv_cache, with_attention: bool, last_rows):
        q_dim, kv_dim = self.heads * self.head_dim, self.kv_heads * self.head_dim
        t = x.shape[0]
        for layer in self.weights:
            h = F.rms_norm(x, (self.hidden,), self.norm)
            q, k, v = (h @ layer["qkv"].t()).split([q_dim, kv_dim, kv_dim], dim=-1)
            if self.qk_norm:
                q = F.rms_norm(q.reshape(t, -1, self.head_dim), (self.head_dim,), self.head_norm).reshape(t, -1)
                k = F.rms_norm(k.reshape(t, -1, self.head_dim), (self.head_dim,), self.head_norm).reshape(t, -1)
            q = q * cos[:, :q_dim] + q.roll(1, -1) * sin[:, :q_dim]
            k = k * cos[:, :kv_dim] + k.roll(1, -1) * sin[:, :kv_dim]
            a = self.attention(q, k, v.contiguous(), shape, kv_cache) if with_attention else q
            x = x + a @ layer["o"].t()
            x = x + self.mlp(F.rms_norm(x, (self.hidden,), self.norm), layer)
        last = F.rms_norm(x[last_rows], (self.hidden,), self.norm)
        return torch.argmax(last @ self.lm_head.t(), dim=-1)


def sdpa(q, k, v, causal: bool, native_gqa: bool):
    """Attention of q's heads over k/v's fewer heads: SDPA's own GQA where it has it, else K/V repeated."""
    if native_gqa:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    group = q.shape[1] // k.shape[1]
    return F.scaled_dot_product_attention(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1),
                                          is_causal=causal)


def gqa_supported(device, dtype) -> bool:
    q = torch.zeros(1, 4, 8, 64, device=device, dtype=dtype)
    k = torch.zeros(1, 2, 8, 64, device=device, dtype=dtype)
    try:
        F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)
        return True
    except (RuntimeError, TypeError):
        return False


def grouped_mm(rows, weight, offs):
    """rows [n, k] in groups ending at ``offs``, times each group's ``weight[e]`` ([out, k]) transposed."""
    if rows.is_cuda:
        return torch._grouped_mm(rows, weight.transpose(-2, -1), offs=offs)
    out, start = [], 0                      # the CPU dry run: one matmul per group
    for e, end in enumerate(offs.tolist()):
        out.append(rows[start:end] @ weight[e].t())
        start = end
    out.append(rows.new_zeros(rows.shape[0] - start, weight.shape[1]))
    return torch.cat(out)


def time_shape(model: Model, shape: Shape, kv_cache, with_attention: bool, graphs: bool, min_reps=5,
               target_s=0.25):
    dev, t = model.device, shape.tokens
    x = torch.randn(t, model.hidden, device=dev, dtype=model.dtype)
    width = model.heads * model.head_dim
    cos = torch.randn(t, width, device=dev, dtype=model.dtype)
    sin = torch.randn(t, width, device=dev, dtype=model.dtype)
    ends, pos = [], 0
    for c, _ in shape.chunks:
        pos += c
        ends.append(pos - 1)
    ends += range(pos, pos + shape.decodes)
    last_rows = torch.tensor(ends, device=dev)     # made before capture: no host copy may happen inside one
    run = lambda: model.step(x, cos, sin, shape, kv_cache, with_attention, last_rows)
    if not graphs:
        start = time.perf_counter()
        run()
        return [time.perf_counter() - start]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()                                  # warm-up outside the graph (allocator, cuBLAS handles)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    graph.replay()
    torch.cuda.synchronize()
    start = time.perf_counter()
    graph.replay()
    torch.cuda.synchronize()
    once = time.perf_counter() - start
    reps = max(min_reps, min(30, int(target_s / max(once, 1e-6))))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in events:
        a.record()
        graph.replay()
        b.record()
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) / 1e3 for a, b in events)
    del graph
    return times


def grid(max_decode_context: int):
    for c in PREFILL:
        yield "prefill", Shape([(c, 0)])
    for c, m in CHUNKS_OVER_CONTEXT:
        yield "chunk", Shape([(c, m)])
    for ctx in DECODE_CONTEXTS:
        if ctx <= max_decode_context:
            for b in DECODE_BATCHES:
                yield "decode", Shape(decodes=b, context=ctx)
    for c, b in MIXED:
        yield "mixed", Shape([(c, 0)], decodes=b, context=MIXED_CONTEXT)


def microbench(device):
    """The card's own ceilings: a large bf16 GEMM's FLOP/s and a device copy's bytes/s (read + write)."""
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(10):
        a @ b
    e.record()
    torch.cuda.synchronize()
    flops = 2 * n ** 3 * 10 / (s.elapsed_time(e) / 1e3)
    src = torch.empty(1 << 30, device=device, dtype=torch.uint8)
    dst = torch.empty_like(src)
    dst.copy_(src)
    s.record()
    for _ in range(10):
        dst.copy_(src)
    e.record()
    torch.cuda.synchronize()
    bw = 2 * src.numel() * 10 / (s.elapsed_time(e) / 1e3)
    return {"bf16_gemm_8192_flops": flops, "copy_bytes_per_s": bw}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", action="append", required=True, help="a Hugging Face config.json (repeatable)")
    p.add_argument("--name", action="append", required=True, help="a name for each --config, in order")
    p.add_argument("--out", required=True, help="CSV to write (rows appended as they are measured)")
    p.add_argument("--meta", help="JSON file for the GPU, software and ceilings")
    p.add_argument("--deadline", type=float, default=400.0, help="seconds after which no new model starts")
    p.add_argument("--stop", type=float, default=520.0, help="seconds after which no new shape starts")
    p.add_argument("--dry-run", action="store_true", help="two tiny layers on the CPU, to check the script")
    args = p.parse_args(argv)
    if len(args.config) != len(args.name):
        p.error("give one --name for each --config")
    started = time.perf_counter()
    dry = args.dry_run or not torch.cuda.is_available()
    device = torch.device("cpu" if dry else "cuda")
    meta = {"torch": torch.__version__, "python": sys.version.split()[0], "dry_run": dry}
    if not dry:
        props = torch.cuda.get_device_properties(0)
        meta.update(gpu=props.name, sms=props.multi_processor_count, memory_bytes=props.total_memory,
                    cuda=torch.version.cuda, **microbench(device))
        print(json.dumps(meta), flush=True)
    fields = ["model", "kind", "mode", "chunks", "decodes", "context", "tokens", "rows", "median_s", "p10_s",
              "p90_s", "reps"]
    with open(args.out, "w", newline="") as fh:
        out = csv.DictWriter(fh, fields)
        out.writeheader()
        for path, name in zip(args.config, args.name):
            if time.perf_counter() - started > args.deadline:
                print(f"deadline: {name} not measured", flush=True)
                meta.setdefault("skipped", []).append(name)
                continue
            cfg = json.load(open(path))
            model = Model(tiny(cfg) if dry else cfg, device, torch.bfloat16, layers=2 if dry else None)
            max_ctx = 256 if dry else max(DECODE_CONTEXTS)
            slots = (4 if dry else max(DECODE_BATCHES)) * max_ctx
            per_seq = max(slots // (4 if dry else max(DECODE_BATCHES)), 6144 + 2048)
            kv = [torch.empty(4 if dry else max(DECODE_BATCHES), model.kv_heads, per_seq, model.head_dim,
                              device=device, dtype=torch.bfloat16).normal_() for _ in range(2)]
            t0 = time.perf_counter()
            for kind, shape in grid(max_ctx):
                if dry and (shape.tokens > 300 or shape.decodes > 4):
                    continue
                if time.perf_counter() - started > args.stop:
                    meta.setdefault("cut_short", []).append(name)
                    break
                for mode in ("full", "noattn"):
                    times = time_shape(model, shape, kv, mode == "full", graphs=not dry)
                    row = {"model": name, "kind": kind, "mode": mode,
                           "chunks": ";".join(f"{c}@{m}" for c, m in shape.chunks), "decodes": shape.decodes,
                           "context": shape.context, "tokens": shape.tokens, "rows": shape.rows,
                           "median_s": f"{times[len(times) // 2]:.6g}", "p10_s": f"{times[len(times) // 10]:.6g}",
                           "p90_s": f"{times[min(len(times) - 1, math.ceil(len(times) * 0.9) - 1)]:.6g}",
                           "reps": len(times)}
                    out.writerow(row)
                    fh.flush()
                    if mode == "full":
                        print(f"{name} {kind:7s} {row['chunks'] or '-':>12s} d{shape.decodes}@{shape.context} "
                              f"{float(row['median_s']) * 1e3:9.3f} ms", flush=True)
            meta.setdefault("models", {})[name] = {"config": os.path.basename(os.path.dirname(path) or path),
                                                   "layers": model.layers, "seconds": time.perf_counter() - t0}
            del model, kv
            if not dry:
                torch.cuda.empty_cache()
    meta["seconds"] = time.perf_counter() - started
    if args.meta:
        with open(args.meta, "w") as fh:
            json.dump(meta, fh, indent=1)
    print(json.dumps(meta), flush=True)


def tiny(cfg: dict) -> dict:
    """A tiny copy of ``cfg``'s architecture for --dry-run (the same code paths, small tensors)."""
    small = dict(cfg, hidden_size=64, num_attention_heads=4, head_dim=16, intermediate_size=128,
                 moe_intermediate_size=32, vocab_size=256,
                 num_key_value_heads=min(cfg.get("num_key_value_heads", 4), 2))
    if cfg.get("num_experts"):
        small["num_experts"] = 8
        small["num_experts_per_tok"] = 2
    return small


if __name__ == "__main__":
    main()
