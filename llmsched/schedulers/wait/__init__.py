"""WAIT and Nested WAIT (Ao, Luo, Simchi-Levi, Wang, *Optimizing LLM Inference: Fluid-Guided Online Scheduling with
Memory Constraints*): the two policies and what they derive their batches from — the fluid model,
thresholds, Nested WAIT's segments and safety buffer, cohorts and memory-feasible admission.

Units are the paper's: a prompt type is (rate λ, input length l, decode length l'), with l' + 1 stages (one
prefill, l' decodes) and l + k KV tokens after stage k. In the engine (vLLM's convention: the prefill step
samples the first token) the same prompt is a request with ``prompt_len = l`` and ``output_len = l' + 1``:
the same number of steps and the same KV after each, so the fluid model describes the simulator exactly.
The paper's experiments are in ``llmsched/reproduce/wait_runs/``.
"""
