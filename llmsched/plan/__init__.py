"""`llmsched plan`: candidates, sound pruning, replica search, cost and Pareto report (docs/plan.md)."""
