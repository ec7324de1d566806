"""`llmsched tune`: a scheduler at its best for given SLOs and traffic (docs/tune.md)."""
