"""Where independent experiments run: in this process, a local process pool, or as Ray tasks.

Every executor has ``map(fn, items) -> list`` with results in input order. Experiments are pure (a config and
a seed determine the result), so which executor ran them never changes a byte of the answer.
"""
from __future__ import annotations

import os
import signal
from concurrent.futures import ProcessPoolExecutor
from urllib.parse import urlparse

CONNECT_TIMEOUT_S = 3.0
EXECUTORS = ("local", "ray")
RAY_GCS_METHOD = "/ray.rpc.NodeInfoGcsService/GetClusterId"
RAY_CLIENT_METHOD = "/ray.rpc.RayletDriver/ClusterInfo"


def quiet_worker() -> None:
    """A pool worker's start: Ctrl-C ends it at once, without a traceback of its own (the command, which gets
    the same Ctrl-C, says it was interrupted). The worker began with Ctrl-C held back (``worker_pool``), so one
    that came while it was still importing ends it here, silently. A command that ignores Ctrl-C (started in the
    background, or under a parent that ignores it) keeps its workers ignoring it too: a worker ended by a Ctrl-C
    its command never sees broke the pool (a BrokenProcessPool traceback, status 1, in CI)."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def worker_pool(jobs: int) -> ProcessPoolExecutor:
    """A pool whose workers are started now, with Ctrl-C held back until they can take it: a Ctrl-C during a
    worker's start-up (imports, seconds on a loaded machine) printed its traceback and broke the pool."""
    pool = ProcessPoolExecutor(max_workers=jobs, initializer=quiet_worker)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        pool.submit(int).result()  # starts the workers, which inherit the mask
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a Ctrl-C held meanwhile reaches this process now
    return pool


class LocalExecutor:
    """A process pool of ``jobs`` workers (1: run in this process, no pool)."""

    def __init__(self, jobs: int | None = None):
        jobs = os.cpu_count() or 1 if jobs is None else jobs
        if not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"--jobs must be a whole number >= 1, got {jobs!r}")
        self.jobs = jobs
        self._pool = None

    def map(self, fn, items) -> list:
        items = list(items)
        if self.jobs == 1 or len(items) <= 1:
            return [fn(x) for x in items]
        if self._pool is None:
            self._pool = worker_pool(self.jobs)
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class RayExecutor:
    """Ray tasks: on the cluster at ``address`` (``auto``: the one running on this machine), or a new local Ray
    started for this process when no address is given (even if another runs here: address "local").
    ``jobs`` caps the CPUs of a locally started Ray."""

    def __init__(self, address: str | None = None, jobs: int | None = None):
        try:
            import ray
        except ImportError:
            raise ValueError("--executor ray needs Ray: pip install 'llmsched[ray]' (or pip install ray)") from None
        if address and address != "auto":
            check_reachable(address)
        self.ray = ray
        self._remote = {}
        if not ray.is_initialized():
            kwargs = {"address": address} if address else {"address": "local", "num_cpus": jobs or os.cpu_count() or 1}
            try:
                ray.init(log_to_driver=False, include_dashboard=False, configure_logging=False, **kwargs)
            except (ConnectionError, RuntimeError) as e:
                raise ValueError(f"--ray-address {address}: cannot connect to Ray ({e}); start one with "
                                 f"`ray start --head` or drop --ray-address for a local Ray") from None
            self._started = True
        else:
            self._started = False

    def map(self, fn, items) -> list:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self.ray.remote(fn)
        return self.ray.get([remote.remote(x) for x in items])

    def close(self) -> None:
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
        self._started = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def check_reachable(address: str) -> None:
    """Fail within seconds, naming the address, when no Ray answers there (ray.init would retry for long).

    Ray's head (GCS, default port 6379) and its client server (``ray://``, 10001) are gRPC services: one call with
    a deadline tells a Ray head from a refused port, silence, or a proxy that answers for any address (this is
    checked at the gRPC level because such proxies complete the TCP and HTTP/2 handshakes themselves)."""
    import grpc
    url = urlparse(address if "://" in address else f"tcp://{address}")
    try:
        host, port = url.hostname, url.port
    except ValueError:
        host = port = None
    if not host:
        raise ValueError(f"--ray-address {address!r}: write HOST:PORT (e.g. 10.0.0.5:6379), ray://HOST:10001, "
                         f"or auto")
    port = port or (10001 if url.scheme == "ray" else 6379)
    method = RAY_CLIENT_METHOD if url.scheme == "ray" else RAY_GCS_METHOD
    channel = grpc.insecure_channel(f"{host}:{port}")
    try:
        call = channel.unary_unary(method, request_serializer=bytes, response_deserializer=bytes)
        call(b"", timeout=CONNECT_TIMEOUT_S)
    except grpc.RpcError as e:
        if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                        grpc.StatusCode.UNIMPLEMENTED):
            raise ValueError(f"--ray-address {address}: cannot reach a Ray head at {host}:{port} "
                             f"({e.code().name.lower()}: {e.details()}); check the address and that the head is "
                             f"running (`ray start --head`)") from None
    finally:
        channel.close()


def make_executor(kind: str = "local", jobs: int | None = None, ray_address: str | None = None):
    """``local`` (process pool, ``jobs`` workers, default CPU count) or ``ray`` (tasks, optional address)."""
    if kind == "local":
        if ray_address:
            raise ValueError("--ray-address applies only with --executor ray")
        return LocalExecutor(jobs)
    if kind == "ray":
        return RayExecutor(ray_address, jobs)
    raise ValueError(f"unknown executor {kind!r}; valid: {', '.join(EXECUTORS)}")
