"""InferMax's offline analysis (Kim et al., *Cost-Aware Scheduling for Concurrent Requests*; Kim et al. §3-§5):
offline runs, schedules as data replayed on the replica, the optimal schedule as a CP-SAT constraint problem and an
exhaustive search that cross-checks it. The scheduler is ``llmsched/schedulers/infermax/``."""
