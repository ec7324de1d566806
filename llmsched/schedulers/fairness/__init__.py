"""Tenants and priorities: VTC (Sheng et al., *Fairness in Serving Large Language Models*, OSDI 2024), weighted fair
queueing by tokens, and priority classes that preempt, each on a chunked-prefill step; with what they share, the
waiting queues kept per tenant or class and the ledger of what their preemptions threw away. The experiment is
``llmsched reproduce fairness`` (docs/fairness.md)."""
