cdef class StepCounters:
    cdef public object busy_time
    cdef public object num_evictions
    cdef public object num_preemptions
    cdef public object num_steps
    cdef public object recent_steps
    cdef public object swap_fallbacks
    cpdef step(self, duration)
    cpdef folded(self, steps, busy_time)
    cpdef preempted(self)
    cpdef swap_fell_back(self)
    cpdef evicted(self)
