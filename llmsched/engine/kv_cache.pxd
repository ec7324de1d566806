cdef class KVCacheManager:
    cdef public object block_size
    cdef public object total
    cdef public object free
    cdef public object swap_total
    cdef public object swap_free
