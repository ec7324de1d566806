"""Errors of the mechanism: each names what was violated and by whom."""


class PlanError(ValueError):
    """A scheduler returned a plan that breaks a hard limit of the replica."""


class KVCapacityError(RuntimeError):
    """KV blocks were asked for beyond what is free (a mechanism bug if a validated plan hits it)."""
