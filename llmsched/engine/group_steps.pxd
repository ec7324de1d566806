# The replica's step state that the fast path reads and writes: declared on the base class, so that its methods
# and Replica's reach these fields as struct slots.
cdef class GroupSteps:
    cdef public object _backoff
    cdef public object _form_wait
    cdef public object _formed_at
    cdef public object _groups
    cdef public object _repeat_plan
    cdef public object add_row
    cdef public object arrivals
    cdef public object asked_at
    cdef public object batch_time
    cdef public object busy
    cdef public object busy_time
    cdef public object completed
    cdef public object config
    cdef public object folds_finishes
    cdef public object group
    cdef public object group_step
    cdef public object index
    cdef public object kv
    cdef public object last_end
    cdef public object now
    cdef public object num_steps
    cdef public object plan
    cdef public object quiet_finishes
    cdef public object recent_steps
    cdef public object row
    cdef public object running
    cdef public object steady
    cdef public object step_end
    cdef public object step_preempted
    cdef public object step_start
    cdef public object swap_time
    cdef public object swapped
    cdef public object version
    cdef public object waiting
    cdef public object wake_at
