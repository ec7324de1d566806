# The network's state in a struct, so that its clock and lists are read without a lookup by name; its methods and
# helpers C calls (the event loop asks it at every transfer's start and end).
cimport cython

cdef class FairNetwork:
    cdef public dict capacity
    cdef public object now
    cdef public list starting
    cdef public list flowing
    cdef public list rates
    cdef public object bytes_done
    cdef public object done_count
    cdef public object busy_time
    cpdef next_event(self)
    @cython.locals(probe=FairNetwork)
    cpdef next_finish(self)
    cpdef advance(self, t)
    cpdef rerate(self)
    cpdef progress(self, t)


cpdef earliest_ready(list starting)
cpdef soonest_end(list flowing, list rates)
cpdef narrowest(tuple sides, dict capacity)
