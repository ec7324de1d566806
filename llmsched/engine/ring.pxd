# The ring compiled, so that a KV tier's rank list (engine/tier_store.py) links its segments in C.
cdef class Ring:
    cdef public object head
    cpdef append(self, node)
    cpdef unlink(self, node)
