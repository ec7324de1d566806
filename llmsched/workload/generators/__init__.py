"""Synthetic requests that carry contents: shared system prompts and multi-turn sessions, open or closed loop."""
