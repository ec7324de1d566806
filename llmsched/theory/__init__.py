"""The papers' theory beside the simulator, as libraries: each `llmsched theory NAME` command (llmsched/cli/theory_*.py)
calls one module here."""
