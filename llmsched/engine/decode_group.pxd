cdef class DecodeGroup:
    cdef public object kv
    cdef public object block_size
    cdef public object clock
    cdef public object ends
    cdef public object base
    cdef public object members
    cdef public object size
    cdef public object partials
    cdef public object hist
    cdef public object context_sum
    cdef public object finish_at
    cdef public object due
    cdef public object max_order
