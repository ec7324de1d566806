# The network's state in a struct, so that its clock and lists are read without a lookup by name.
cdef class FairNetwork:
    cdef public dict capacity
    cdef public object now
    cdef public list starting
    cdef public list flowing
    cdef public list rates
    cdef public object bytes_done
    cdef public object done_count
    cdef public object busy_time
