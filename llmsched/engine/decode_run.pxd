# The group fast-forward's clock and counters typed, so that telling them where a run left off is a C call.
cimport cython
from llmsched.engine.step_clock cimport StepClock
from llmsched.engine.step_counters cimport StepCounters


@cython.locals(clock=StepClock, counters=StepCounters)
cpdef fast_forward_group(rep, until, horizon, through_finishes=*)
