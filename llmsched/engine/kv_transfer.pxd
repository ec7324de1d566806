# A link's state in a struct (fields as Python objects: the same values, read from a slot instead of through a
# slot descriptor).
cdef class SharedLink:
    cdef public object bandwidth
    cdef public object latency
    cdef public object concurrency
    cdef public object now
    cdef public object waiting
    cdef public object starting
    cdef public object flowing
    cdef public object busy_time
    cdef public object bytes_done
    cdef public object done_count
    cdef public object cached_next
    cdef public object fifo
