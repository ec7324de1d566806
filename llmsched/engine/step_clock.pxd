cdef class StepClock:
    cdef public object busy
    cdef public object last_end
    cdef public object now
    cdef public object plan
    cdef public object row
    cdef public object step_end
    cdef public object step_preempted
    cdef public object step_start
    cdef public object swap_time
    cdef public object wake_at
    cpdef tick(self, now)
    cpdef asleep_until(self, wake_at)
    cpdef owe(self, seconds)
    cpdef pay(self)
    cpdef launched(self, plan, row, preempted)
    cpdef carries(self, preempted)
    cpdef listed(self, plan)
    cpdef start(self, now, duration)
    cpdef repeat(self, now)
    cpdef ended(self, now)
    cpdef idle(self)
    cpdef folded(self, start, end, plan, row)
    cpdef stretched(self, end)
