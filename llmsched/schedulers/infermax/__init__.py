"""InferMax (Kim, Hong, Gulcehre, Ailamaki, *Optimizing LLM Inference for Database Systems: Cost-Aware Scheduling
for Concurrent Requests*): the parameterised scheduler, its named settings and the length histogram its
§6 policy admits by. The optimal offline schedules (CP-SAT, exhaustive search) are in ``llmsched/theory/infermax/``.
"""
