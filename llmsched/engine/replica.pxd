from llmsched.engine.group_steps cimport GroupSteps
from llmsched.engine.kv_cache cimport KVCacheManager
from llmsched.engine.step_clock cimport StepClock
from llmsched.engine.step_counters cimport StepCounters


cdef class Replica:
    cdef dict __dict__
    cdef public object _order
    cdef public object add_row
    cdef public object arrivals
    cdef public object asked_at
    cdef public object batch_time
    cdef public object caching
    cdef public StepClock clock
    cdef public object completed
    cdef public object config
    cdef public StepCounters counters
    cdef public object folds
    cdef public object folds_finishes
    cdef public object fruitless
    cdef public GroupSteps groups
    cdef public object in_order
    cdef public object index
    cdef public KVCacheManager kv
    cdef public object landed
    cdef public object loading
    cdef public object quiet_finishes
    cdef public object receiving
    cdef public object reserved
    cdef public object running
    cdef public object scheduler
    cdef public object sends_kv
    cdef public object sent
    cdef public object steps
    cdef public object swapped
    cdef public object tiers
    cdef public object transferring
    cdef public object version
    cdef public object view
    cdef public object waiting
