"""The theory of Bari, Hegde, de Veciana, *Optimal Scheduling Algorithms for LLM Inference: Theory and Practice*
(Bari et al.): RAD's capacity bound (Theorem 1), its cycle condition (Theorem 2) and a simulated check of the bound.
The policies are in ``llmsched/schedulers/rad_slai/``."""
