# The fleet's transfers in a struct, their network typed, so that a transfer's start and end (each request's, in a
# disaggregated run) are C calls that read its records and the network's state as slots.
cimport cython
from llmsched.engine.kv_network cimport FairNetwork
from llmsched.request cimport Request


cdef class KVTransfers:
    cdef public object spec
    cdef public object link
    cdef public object connector
    cdef public object tp_of
    cdef public object block_of
    cdef public dict records
    cdef public dict moving
    cdef public FairNetwork network
    cdef public object count
    cdef public object bytes
    cdef public list durations
    cdef public object first
    cdef public object last
    cdef public dict pairs
    cpdef rank_bytes(self, prompt, src, dst)
    @cython.locals(rec=list, net=FairNetwork)
    cpdef start(self, Request req, dst, now)
    cpdef next_event(self)
    @cython.locals(req=Request, rec=list)
    cpdef advance(self, t)
