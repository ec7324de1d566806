"""summary.json's ``kv_offload`` section: what the KV tiers below the GPU did over a run, from each replica's tier
figures (engine/kv_tiers.py ``KVTiers.stats``) and the finished requests' cached tokens split by tier."""
from __future__ import annotations

import math

from .requests import TIER_CACHED_PREFIX


def offload_summary(rows: list[dict], cached_by_tier: dict, prompt_tokens: int) -> dict:
    """``rows``: each replica's tier figures (a fleet's pools may keep different tiers, or none);
    ``cached_by_tier``: requests.csv's ``cached_tokens_<where>`` summed over finished requests; ``prompt_tokens``:
    theirs. Per medium: the share of prompt tokens its hits supplied at first admission (``hit_rate``), every
    admission's loaded tokens, bytes each way, chunks stored, evicted and held, stores without room, and its link's
    busy share each way (mean over the replicas that keep it). ``mode``: the connector, or the replicas' several
    joined by commas."""
    media = list(dict.fromkeys(t["medium"] for row in rows for t in row["tiers"]))
    tiers = []
    for medium in media:
        per = [t for row in rows for t in row["tiers"] if t["medium"] == medium]
        n = len(per)
        cached = cached_by_tier.get(TIER_CACHED_PREFIX + medium, 0)
        tiers.append({
            "medium": medium,
            "cached_tokens": cached,
            "hit_rate": cached / prompt_tokens if prompt_tokens else math.nan,
            "loaded_tokens": sum(t["hit_tokens"] for t in per),
            "loaded_bytes": sum(t["loaded_bytes"] for t in per),
            "stored_bytes": sum(t["stored_bytes"] for t in per),
            "stored_chunks": sum(t["stored_chunks"] for t in per),
            "evicted_chunks": sum(t["evicted_chunks"] for t in per),
            "store_skips": sum(t["store_skips"] for t in per),
            "chunks_held": sum(t["chunks_held"] for t in per),
            "chunks": sum(t["chunks"] for t in per),
            "read_utilisation": sum(t["read_utilisation"] for t in per) / n,
            "write_utilisation": sum(t["write_utilisation"] for t in per) / n,
        })
    gpu = cached_by_tier.get(TIER_CACHED_PREFIX + "gpu", 0)
    loads = sum(row["loads"] for row in rows)
    return {"mode": ", ".join(dict.fromkeys(row["mode"] for row in rows)), "gpu_cached_tokens": gpu,
            "gpu_hit_rate": gpu / prompt_tokens if prompt_tokens else math.nan,
            "loads": loads, "mean_load_time_s": sum(row["load_time_s"] for row in rows) / loads if loads else math.nan,
            "slow_loads": sum(row["slow_loads"] for row in rows),
            "deferred_loads": sum(row["deferred_loads"] for row in rows),
            "released_loads": sum(row["released_loads"] for row in rows),
            "step_time_in_transfers_s": sum(row["sync_time_s"] for row in rows), "tiers": tiers}
