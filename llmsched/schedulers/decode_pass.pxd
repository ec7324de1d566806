cdef class RunningWork:
    cdef public object view
    cdef public object order
    cdef public object group
    cdef public object running
    cdef public object decodes
    cdef public object partials
    cdef public object grow
    cpdef split(self)
    cpdef decode_all(self, plan)
    cpdef add_decodes(self, plan, reserve=*, limit=*, among_decodes=*)
