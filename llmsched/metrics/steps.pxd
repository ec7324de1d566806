cdef class StepLog:
    cdef public object rows
    cdef public object hit_rows
    cdef public object hit_tokens
