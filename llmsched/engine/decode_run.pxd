# The group fast-forward's replica, clock and counters typed, so that its fields, its group's and telling the clock
# and counters where a run left off are struct slots and C calls (a cimport circle through replica.pxd that Cython
# resolves, as group_steps.pxd's).
cimport cython
from llmsched.engine.replica cimport Replica
from llmsched.engine.step_clock cimport StepClock
from llmsched.engine.step_counters cimport StepCounters


@cython.locals(clock=StepClock, counters=StepCounters)
cpdef fast_forward_group(Replica rep, until, horizon, through_finishes=*)
