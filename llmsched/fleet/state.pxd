# The fleet's state in a struct, so that routing a request and hearing of those that left, at every request, are C
# calls that read its members and counters as slots.
cimport cython
from llmsched.fleet.members cimport Members


cdef class FleetState:
    cdef public object fleet
    cdef public object controllers
    cdef public object autoscalers
    cdef public dict pools
    cdef public dict members
    cdef public list replicas
    cdef public object lives
    cdef public object pool_index
    cdef public list members_of
    cdef public set draining
    cdef public object unrouted
    cdef public object transfers
    cdef public object handoff
    cdef public dict role_load
    cdef public object scale_events
    cdef public object schedule
    cdef public object quiet
    cdef public object handing
    cpdef route(self, req, rng, role=*)
    @cython.locals(members=Members)
    cpdef left(self, rep, list done)
    cpdef idle(self, rep, now)
