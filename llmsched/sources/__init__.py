"""Request sources by kind: which kind a run's config asks for, and its builder (registry.py names them)."""
