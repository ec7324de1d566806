from llmsched.engine.replica cimport Replica

cdef class ReplicaView:
    cdef public Replica _r
