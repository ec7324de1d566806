# A KV tier's segments typed, so that its walks over them (insert, cover, evict, rerank) read their bounds in C.
cimport cython
from llmsched.engine.ring cimport Ring


cdef class Seg:
    cdef public object key
    cdef public long lo
    cdef public long hi
    cdef public bint up
    cdef public long pins
    cdef public bint ready
    cdef public Seg prev
    cdef public Seg next


@cython.locals(g=cython.long, last=cython.long, top=cython.long)
cpdef list piece_ranges(keys, starts, long lo, long hi, bint reverse=*)


cdef class TierStore(Ring):
    cdef public long capacity
    cdef public long used
    cdef public long evictable
    cdef public dict table
    cdef public long evicted
    cdef public long inserted
    @cython.locals(s=Seg, head=Seg)
    cpdef append(self, node)
    @cython.locals(s=Seg)
    cpdef unlink(self, node)
    @cython.locals(s=Seg, out=list, listed=list)
    cpdef list overlapping(self, key, long a, long b)
    @cython.locals(upper=Seg)
    cpdef Seg split(self, Seg seg, long at)
    @cython.locals(s=Seg)
    cpdef list cover(self, key, long a, long b)
    cpdef drop(self, Seg seg)
    @cython.locals(i=cython.long)
    cpdef place(self, Seg seg)
    @cython.locals(s=Seg, p=cython.long, a=cython.long, b=cython.long)
    cpdef long hits(self, keys, starts, long first, long most)
    @cython.locals(was=bint, s=Seg, a=cython.long, b=cython.long)
    cpdef pin_ranges(self, list ranges, long by=*)
    @cython.locals(s=Seg, lower=Seg, upper=Seg, a=cython.long, b=cython.long)
    cpdef rerank_ranges(self, list ranges)
    @cython.locals(want=cython.long, held=bint, s=Seg, seg=Seg, head=Seg, p=cython.long, a=cython.long,
                   b=cython.long, free=cython.long, take=cython.long, room=cython.long, stored=cython.long)
    cpdef insert_ranges(self, list offer, bint partial=*)
    @cython.locals(s=Seg, a=cython.long, b=cython.long)
    cpdef complete(self, list ranges)
    @cython.locals(s=Seg, nxt=Seg, size=cython.long)
    cpdef evict(self, long n)
