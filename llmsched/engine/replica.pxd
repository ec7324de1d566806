from llmsched.engine.group_steps cimport GroupSteps


cdef class Replica(GroupSteps):
    cdef dict __dict__
    cdef public object _order
    cdef public object folds
    cdef public object fruitless
    cdef public object num_evictions
    cdef public object num_preemptions
    cdef public object scheduler
    cdef public object steps
    cdef public object swap_fallbacks
    cdef public object view
