# The prefill -> decode hop in a struct, the requests it copies and finishes typed, so that each request's copy at
# its prefill's start and its record at the end read their fields as struct slots.
cimport cython
from llmsched.request cimport Request


cdef class KVHandoff:
    cdef public object front_end
    cdef public object first_token_at_prefill
    cdef public dict first_tokens
    cdef public dict clients
    cdef public dict records
    @cython.locals(copy=Request)
    cpdef begin(self, Request req)
    @cython.locals(client=Request)
    cpdef report(self, Request req)
    @cython.locals(rec=list)
    cpdef finish(self, Request req)
    cpdef record_of(self, rid)
