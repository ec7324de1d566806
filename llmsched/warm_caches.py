"""A replay's prefix caches as its benchmark left them before the run: the prompt its client sent to warm up
(``vllm bench serve``'s ready check and ``--num-warmups``: workload/traces/bench_warmups.py) ran to its end on the
replicas its copies reached, so the run's first request, and the first prompt of a dataset's prefix, find it
cached, as vLLM's ``num_cached_tokens`` shows they did."""
from __future__ import annotations

import warnings

from .request import Request


def warm_caches(replicas, source, max_total_tokens: int | None) -> None:
    """Warm the first replicas of ``replicas`` (DP ranks, or a role's replicas in the fleet's order) with the prompt
    ``source`` says its client sent before the run, if any: one replica for each copy sent, as vLLM's balancer
    gives each the next idle rank from rank 0."""
    sent = getattr(source, "sent_before", None)
    if sent is None:
        return
    content = sent.content(None if max_total_tokens is None else max_total_tokens - 1)
    prompt = min(sent.prompt_len, content.length)
    for rep in replicas[:sent.replicas]:
        if rep.caching and not rep.warm(Request(-1, 0.0, prompt, 1, content=content)):
            warnings.warn(f"the benchmark's warm-up prompt ({prompt} tokens) does not fit replica {rep.index}'s "
                          f"{rep.kv.free} free KV blocks: its cache starts cold", stacklevel=2)
