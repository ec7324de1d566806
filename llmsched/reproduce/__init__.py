"""The papers' headline experiments, as libraries: each `llmsched reproduce NAME` command (llmsched/cli/reproduce_*.py)
runs one module here."""

# The batch-time kind the reproductions' figures were made with. Every command's default is vllm-v1 (the engine
# model validated against vLLM); a reproduction that relied on the default before pins the roofline it ran with,
# so its tables stay what they were.
PINNED_KIND = "roofline"
