# A decode instance's received requests: the replica and the request typed, so that their queues, KV manager and
# counts are struct slots, not lookups by name.
cimport cython
from llmsched.engine.replica cimport Replica
from llmsched.request cimport Request


cpdef receive(Replica rep, Request req)
@cython.locals(req=Request)
cpdef to_reserve(Replica rep)
@cython.locals(req=Request)
cpdef reserve(Replica rep)
cpdef loaded(Replica rep, Request req)
cpdef drop(Replica rep, Request req)
@cython.locals(at=Py_ssize_t)
cpdef front(list waiting)
cpdef holding(Replica rep)
cpdef stop(Replica rep)
