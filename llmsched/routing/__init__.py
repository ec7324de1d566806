"""Routers: which replica takes each arrival (the cluster-level, 'global' scheduler), for a run's replicas or a
fleet's pool alike. ``base`` is the interface, ``registry`` reaches a router by name, and each other module is one
family: ``simple`` (random, round-robin), ``least_loaded``, ``prefix_affinity``, ``prefix_hash``, ``pab``, ``vllm_dp``."""
