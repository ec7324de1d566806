"""llmsched: LLM inference schedulers in a simulator, with their theory, and inside vLLM."""
from . import compiled

compiled.guard()  # before any module the install may have compiled is imported
