"""When requests arrive: renewal processes, a rate that changes with time (its shape and the ``--rate-schedule``
spec) and the arrivals that follow it."""
