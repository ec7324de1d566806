cdef class BlockManager:
    cdef public object block_size
    cdef public object total
    cdef public object free


cdef class SwapSpace:
    cdef public object total
    cdef public object free
