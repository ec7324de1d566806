# The fleet loop's state in a struct and its handlers as C methods; the replicas and requests it reads typed, so
# that their fields and clocks are struct slots, not lookups by name (a disaggregated request passes through
# several of these handlers on two replicas: the generic lookups were what it cost beyond a colocated run).
cimport cython
from llmsched.engine.replica cimport Replica
from llmsched.fleet.kv_transfers cimport KVTransfers
from llmsched.fleet.state cimport FleetState
from llmsched.request cimport Request


cpdef join_held(Replica rep, Request r, how, t)


@cython.final
cdef class FleetLoop:
    cdef public object source
    cdef public FleetState fleet
    cdef public object horizon
    cdef public list replicas
    cdef public object rng
    cdef public object wall0
    cdef public object log
    cdef public object steps
    cdef public object stream
    cdef public list heap
    cdef public list actions
    cdef public Py_ssize_t seq
    cdef public object arrivals
    cdef public Request pending
    cdef public object bar
    cdef public object on_done
    cdef public object choose
    cdef public bint staged
    cdef public dict stage_of
    cdef public set draining
    cdef public dict held
    cdef public KVTransfers transfers
    cdef public Py_ssize_t transfer_event
    cdef public dict unread
    cdef public dict unread_of
    cdef public object client_timeout
    cdef public double abort_delay
    cdef public str timeout_reason
    cdef public list aborts
    cdef public dict live
    cdef public dict hopping
    cdef public dict aborting
    cpdef schedule(self, t, action)
    cdef push(self, t, kind, payload)
    cdef next_event(self)
    cpdef client_request(self, r)
    cdef leave(self, r, t)
    @cython.locals(r=Request)
    cdef start_transfers(self, Replica rep, t)
    cdef push_transfer(self)
    @cython.locals(r=Request, rep=Replica)
    cdef settle_transfers(self, t)
    cdef wake_or_start(self, Replica rep, t)
    @cython.locals(sender=Replica)
    cdef read(self, rid, t)
    cdef public bint empty(self, Replica rep) except -1
    @cython.locals(r=Request)
    cdef drain(self, Replica rep, t)
    cdef start(self, Replica rep, t, until)
    @cython.locals(r=Request)
    cdef admit_held(self, Replica rep, t)
    @cython.locals(rep=Replica)
    cdef enter(self, Request req, path, stage, t)
    @cython.locals(r=Request, rep=Replica, waiting=list)
    cdef abort(self, rid, t, ending=*)
    cdef apply_aborts(self, Replica rep, t)
    cdef step_ended(self, Replica rep, t)
    @cython.locals(rep=Replica, pending=Request)
    cpdef run(self)
