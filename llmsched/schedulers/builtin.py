"""Importing this module registers every built-in scheduler."""
from . import fastertransformer, orca, sarathi, vllm, vllm_chunked  # noqa: F401
