"""What ``llmsched reproduce wait`` runs for WAIT / Nested WAIT (Ao et al., *Fluid-Guided Online Scheduling with
Memory Constraints*): the experiments, the authors' own setting, capacities, §7's extensions, runs in the
paper's own model and the KV ledger of a run."""
