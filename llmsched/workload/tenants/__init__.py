"""Who sends: tenants, each its own arrival stream, and user tiers, each its own SLOs."""
