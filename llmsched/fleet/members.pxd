# A role's serving replicas in a struct, its router's calls C calls from the fleet (every request is routed here).
cdef class Members:
    cdef public object role
    cdef public object router
    cdef public list replicas
    cdef public dict position
    cdef public object started
    cpdef route(self, req, rng)
    cpdef left(self, rep, count)
