"""Batch-time models against measured step times: data readers, the declared calibration split, errors."""
