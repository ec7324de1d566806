"""The fleet layer: pools of replicas, each with its own model, GPU, parallelism, scheduler and router; the life of
a replica (provisioning, loading, warm, serving, draining, gone) and what it is billed; the path a request takes
through the pools; the one entry point, ``FleetState.scale``, that scripted scale events and autoscalers call.

It sits between the policies and the runs: it builds on replicas and routers, and the runs layer (``sim/``,
``experiment.py``) drives it. See docs/architecture.md ("Fleet layer") and docs/fleet.md.
"""
