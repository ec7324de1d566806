"""Routers beside the built-in ones of ``llmsched/routers.py``: the base class every router derives from, and the
cache-aware routers (``prefix-affinity``, ``prefix-hash``), one module each. ``routers.py`` registers them."""
