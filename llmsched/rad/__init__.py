"""Seed 000's theory (Bari, Hegde, de Veciana): RAD's capacity bound (Theorem 1) and cycle condition (Theorem 2)."""
from .theory import (RadBound, TileCosts, rad_bound, saturated_throughput, t_max, theorem2_holds,
                     theorem2_min_n)

__all__ = ["RadBound", "TileCosts", "rad_bound", "saturated_throughput", "t_max", "theorem2_holds",
           "theorem2_min_n"]
