from .base import Scheduler
from .registry import create_scheduler, register, register_variant, scheduler_info, scheduler_names

__all__ = ["Scheduler", "create_scheduler", "register", "register_variant", "scheduler_info", "scheduler_names"]
