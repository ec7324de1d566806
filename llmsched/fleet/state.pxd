# The fleet's state in a struct (other attributes in its dict), so that routing a request and hearing of those that
# left, at every request, are C calls that read its members and counters as slots.
cimport cython
from llmsched.fleet.members cimport Members


cdef class FleetState:
    cdef dict __dict__
    cdef public object fleet
    cdef public dict members
    cdef public list replicas
    cdef public list members_of
    cdef public set draining
    cdef public object unrouted
    cdef public dict role_load
    cdef public object transfers
    cpdef route(self, req, rng, role=*)
    @cython.locals(members=Members)
    cpdef left(self, rep, list done)
    cpdef idle(self, rep, now)
