"""The papers' headline experiments, as libraries: each `llmsched reproduce NAME` command (llmsched/cli/reproduce_*.py)
runs one module here."""
