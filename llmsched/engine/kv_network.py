"""Transfers between the GPUs of several instances at once: each transfer leaves one instance's send side and
enters another's receive side, and every side's bandwidth is shared max-min fairly among the transfers on it.

A disaggregated deployment moves each request's KV from a prefill instance to a decode instance, each instance
with its own network links (one NIC per GPU on a DGX-class node, every TP rank moving its share at once:
``kv_transfer.transfer_split``). Two transfers contend where they share a side: two prefill instances sending to
one decode instance share its receive bandwidth; one prefill instance sending to two decode instances shares its
send bandwidth. The rates are the max-min fair allocation (progressive filling: every transfer's rate grows alike
until a side is full, those crossing it stop there, the rest grow on; D. Bertsekas, R. Gallager, *Data Networks*,
2nd ed., section 6.5.2), recomputed whenever a transfer starts moving or finishes. Where every transfer crosses one
common side this is ``kv_transfer.SharedLink``'s processor sharing: n transfers get 1/n of it each.

A transfer first spends its latency (not using bandwidth), then moves its bytes. Like ``SharedLink`` the network
knows nothing of the simulator: the event loop asks when its next change is (``next_event``), advances it to a
time (``advance``: the transfers finished by then) and starts transfers (``start``).
"""
from __future__ import annotations

import math

EXACT = 1e-9  # relative: a transfer whose bytes end within this of the earliest end finishes with it


class FairNetwork:
    __slots__ = ("capacity", "now", "starting", "flowing", "rates", "bytes_done", "done_count", "busy_time")

    def __init__(self):
        self.capacity: dict = {}  # side -> bytes/s
        self.now = 0.0
        self.starting: list = []  # [ready time, tag, bytes, sides]: in their latency
        self.flowing: list = []  # [bytes left, tag, sides]: moving, at ``rates[i]``
        self.rates: list[float] = []
        self.bytes_done = 0.0
        self.done_count = 0
        self.busy_time = 0.0  # time with bytes moving somewhere

    def side(self, key, bandwidth: float) -> None:
        """A send or receive side ``key`` of ``bandwidth`` bytes/s (> 0)."""
        if not (bandwidth > 0 and bandwidth < math.inf):
            raise ValueError(f"a link side's bandwidth must be above zero, got {bandwidth!r}")
        self.capacity[key] = float(bandwidth)

    def __len__(self) -> int:
        return len(self.starting) + len(self.flowing)

    def start(self, now: float, nbytes: float, tag, sides: tuple, latency: float) -> None:
        """A transfer of ``nbytes`` across ``sides`` (keys given to ``side``) submitted at ``now``, moving after
        ``latency`` seconds; advance the network to ``now`` (and collect what finished) first."""
        if nbytes < 0 or latency < 0:
            raise ValueError(f"a transfer needs bytes >= 0 and latency >= 0, got {nbytes!r} and {latency!r}")
        if not sides or any(s not in self.capacity for s in sides):
            raise ValueError(f"a transfer crosses one or more known link sides, got {sides!r}")
        if now != self.now:
            assert not self.advance(now), "advance the network to now (and collect its finished transfers) first"
        self.starting.append([now + latency, tag, float(nbytes), tuple(sides)])

    def next_event(self) -> float | None:
        """When the next transfer ends its latency or its bytes (None: nothing in flight)."""
        t = earliest_ready(self.starting) if self.starting else None
        if self.flowing:
            end = self.now + soonest_end(self.flowing, self.rates)
            t = end if t is None or end < t else t
        return t

    def next_finish(self) -> float | None:
        """When the next transfer moves its last byte (None: nothing in flight): ``advance``'s own steps, run on a
        copy past any latency that ends first. A transfer that starts moving changes the others' rates but lands
        nothing, so an event loop that waits for this wakes when a transfer lands, not at every latency's end; and
        since ``advance`` takes the same steps from the same state, it finishes that transfer at this very float."""
        starting, flowing = self.starting, self.flowing
        if not flowing:
            if not starting:
                return None
            if len(starting) == 1:  # alone on the network: its latency, then its bytes at its narrowest side
                ready, _, nbytes, sides = starting[0]
                return ready + nbytes / narrowest(sides, self.capacity) if nbytes > 0 else ready
        probe = FairNetwork()
        probe.capacity = self.capacity
        probe.now = self.now
        probe.starting = list(starting)  # (its entries are read, never changed)
        probe.flowing = [list(f) for f in flowing]
        probe.rates = list(self.rates)
        while True:
            done = probe.advance(probe.next_event())
            if done:
                return done[0][1]

    def advance(self, t: float) -> list:
        """Move the clock to ``t``; ``[(tag, finish time)]`` of the transfers finished by then, in finishing order
        (ties: in order of starting)."""
        if t < self.now:
            raise ValueError(f"the network's clock runs forward: asked for {t} at {self.now}")
        if not self.starting and not self.flowing:
            self.now = t
            return []
        finished = []
        while True:
            te = self.next_event()
            if te is None or te > t:
                # bytes ending within EXACT after t end at t (progress): they are finished too, not dropped
                gone = self.progress(t)
                if gone:
                    for tag in gone:
                        finished.append((tag, t))
                        self.done_count += 1
                    self.rerate()
                return finished
            gone = self.progress(te)
            if self.starting and earliest_ready(self.starting) <= te:
                ready = [s for s in self.starting if s[0] <= te]
                self.starting = [s for s in self.starting if s[0] > te]
                for _, tag, nbytes, sides in ready:
                    if nbytes > 0:
                        self.flowing.append([nbytes, tag, sides])
                    else:
                        gone.append(tag)
            for tag in gone:
                finished.append((tag, te))
                self.done_count += 1
            self.rerate()

    def rerate(self) -> None:
        """The flowing transfers' max-min fair rates (after one starts moving or finishes)."""
        flowing = self.flowing
        if len(flowing) == 1:  # alone: its narrowest side
            self.rates = [narrowest(flowing[0][2], self.capacity)]
        else:
            self.rates = fair_rates([f[2] for f in flowing], self.capacity)

    def progress(self, t: float) -> list:
        """Bytes move from the clock to ``t`` at the current rates (no change between); returns the tags of the
        transfers whose bytes end by ``t`` (those ending first, and any within ``EXACT`` of them), removed. A
        remainder too small to move the clock (now + its time == now) ends at once, or the clock could not reach
        its end."""
        dt = t - self.now
        gone = []
        if not self.flowing:
            self.now = t
            return gone
        flowing, rates = self.flowing, self.rates
        first = soonest_end(flowing, rates)
        ends = dt >= first * (1 - EXACT) or self.now + first <= self.now
        if dt > 0 or ends:
            kept, kept_rates = [], []
            for f, r in zip(flowing, rates):
                moved = r * dt
                if ends and f[0] / r <= first * (1 + EXACT):
                    moved = f[0]
                self.bytes_done += moved if moved < f[0] else f[0]
                f[0] -= moved
                if f[0] <= 0.0:
                    gone.append(f[1])
                else:
                    kept.append(f)
                    kept_rates.append(r)
            self.flowing, self.rates = kept, kept_rates
            if dt > 0:
                self.busy_time += dt
        self.now = t
        return gone

    def utilisation(self, duration: float) -> float:
        """Share of ``duration`` some bytes moved."""
        return self.busy_time / duration if duration > 0 else 0.0


# (loops, not min() over generators: the network is asked at every transfer's start and end, and a generator is an
# object made and thrown away each time)
def earliest_ready(starting: list) -> float:
    """The earliest end of latency among ``starting`` (not empty)."""
    t = starting[0][0]
    for s in starting:
        if s[0] < t:
            t = s[0]
    return t


def soonest_end(flowing: list, rates: list) -> float:
    """Seconds until the first of ``flowing`` (not empty) moves its last byte at ``rates``."""
    first = flowing[0][0] / rates[0]
    for i in range(1, len(flowing)):
        x = flowing[i][0] / rates[i]
        if x < first:
            first = x
    return first


def narrowest(sides: tuple, capacity: dict) -> float:
    """The least bandwidth of ``sides``."""
    least = capacity[sides[0]]
    for s in sides:
        if capacity[s] < least:
            least = capacity[s]
    return least


def fair_rates(routes: list[tuple], capacity: dict) -> list[float]:
    """Max-min fair rates of transfers each crossing the sides in ``routes[i]`` (progressive filling)."""
    n = len(routes)
    rates = [0.0] * n
    if not n:
        return rates
    users: dict = {}
    for route in routes:
        for s in route:
            users[s] = users.get(s, 0) + 1
    if all(k == 1 for k in users.values()):  # no side shared: each at its narrowest side
        return [narrowest(route, capacity) for route in routes]
    left = {s: capacity[s] for route in routes for s in route}
    active = set(range(n))
    while active:
        users: dict = {}
        for i in active:
            for s in routes[i]:
                users[s] = users.get(s, 0) + 1
        grow = min(left[s] / k for s, k in users.items())
        full = set()
        for s, k in users.items():
            left[s] -= grow * k
            if left[s] <= capacity[s] * EXACT:
                full.add(s)
        for i in active:
            rates[i] += grow
        active = {i for i in active if not full.intersection(routes[i])}
    return rates
