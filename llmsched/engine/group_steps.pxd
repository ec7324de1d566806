# The decode-group path, a component of the replica: typed back to it (a cimport circle Cython resolves), so that
# its methods reach the replica's fields, clock and counters as struct slots.
from llmsched.engine.decode_group cimport DecodeGroup
from llmsched.engine.replica cimport Replica


cdef class GroupSteps:
    cdef public Replica rep
    cdef public object backoff
    cdef public object form_wait
    cdef public object formed_at
    cdef public object forms
    cdef public DecodeGroup group
    cdef public object group_step
    cdef public object repeat_plan
    cdef public object steady
    cpdef end_and_repeat(self, now)
    cpdef fold(self, until, horizon)
    cpdef repeats(self, now)
    cpdef relaunch_group(self, now)
    cpdef launch_group(self, plan, now)
    cpdef end_group_step(self, now)
    cpdef listed_step_ended(self)
    cpdef listed_launch(self)
    cpdef settle(self)
    cpdef form_group(self)
