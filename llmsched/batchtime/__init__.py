"""Batch-time models: how long one engine step takes."""
from .base import Batch, BatchTimeModel
from .linear import BASE_TERMS, EXTRA_TERMS, FitReport, LinearBatchTime
from .registry import BATCH_TIME_MODELS, make_batch_time_model
from .roofline import RooflineBatchTime

__all__ = ["Batch", "BatchTimeModel", "RooflineBatchTime", "LinearBatchTime", "FitReport", "BASE_TERMS",
           "EXTRA_TERMS", "BATCH_TIME_MODELS", "make_batch_time_model"]
