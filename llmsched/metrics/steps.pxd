cdef class StepLog:
    cdef public object replica
    cdef public object start
    cdef public object duration
    cdef public object prefill_tokens
    cdef public object num_prefills
    cdef public object num_decodes
    cdef public object context_sum
    cdef public object kv_used_blocks
    cdef public object kv_total_blocks
    cdef public object num_waiting
    cdef public object num_running
    cdef public object num_preempted
    cdef public object hit_rows
    cdef public object hit_tokens
