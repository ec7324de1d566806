"""Advance several probe searches in lock-step, so that one round's probes run together on an executor.

A search is a generator that yields the next point to probe (a rate, a replica count), receives that point's
Probe and returns its answer. Because every search's path depends only on verdicts, the executor and its number
of workers never change an answer. Capacity searches rates; plan searches replica counts.
"""
from __future__ import annotations

from typing import Callable, Hashable

from ..experiment import RunConfig
from .probe import Probe, measure_all


def run_lockstep(searches: dict[Hashable, object], configs_for: Callable[[Hashable, object], list[RunConfig]],
                 probe_for: Callable[[Hashable, object, list], Probe], executor=None, cache=None,
                 on_probe: Callable[[Hashable, object, Probe, list[RunConfig]], str] | None = None,
                 progress_label: str | None = None) -> dict:
    """Drive every search to its end; returns {key: the search's return value}.

    ``configs_for(key, x)`` gives the runs measuring point ``x`` (one per seed); ``probe_for(key, x, records)``
    turns their records into a Probe; ``on_probe`` sees each Probe and returns a progress line.
    """
    pending = {key: next(gen) for key, gen in searches.items()}
    answers: dict = {}
    bar = None
    if progress_label:
        from tqdm import tqdm
        bar = tqdm(unit="probe", desc=progress_label, leave=False)
    while pending:
        keys = list(pending)
        batches = [configs_for(key, pending[key]) for key in keys]
        records = measure_all([cfg for batch in batches for cfg in batch], executor, cache)
        start = 0
        for key, batch in zip(keys, batches):
            x = pending[key]
            probe = probe_for(key, x, records[start:start + len(batch)])
            start += len(batch)
            line = on_probe(key, x, probe, batch) if on_probe else ""
            if bar is not None:
                bar.update()
                bar.set_postfix_str(line)
            try:
                pending[key] = searches[key].send(probe)
            except StopIteration as stop:
                del pending[key]
                answers[key] = stop.value
    if bar is not None:
        bar.close()
    return answers
