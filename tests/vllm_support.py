"""Shared by the vLLM tests: skip when vLLM is not importable (a failure under CI, LLMSCHED_REQUIRE_VLLM=1), and a
vLLM OpenAI-compatible server run as a subprocess on a loopback port, with bounded waits and no leftovers.

The server takes 30-90 s to start on 2 cores (two processes import vLLM and torch). When the session will run
tests/test_vllm_serve.py, the in-process tests' engine fixture starts it first (``prestart_server``), so its
start-up overlaps their run; the serve test then takes it (``take_server``) and stops it.
"""
import atexit
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from llmsched.vllm import vllm_available


def require_vllm(*modules: str):
    """Skip (fail under CI) unless vLLM and ``modules`` (e.g. the ``openai`` client) import."""
    ok, why = vllm_available()
    for name in modules if ok else ():
        try:
            __import__(name)
        except ImportError as e:
            ok, why = False, f"{name} is not importable ({e}); install it with scripts/install.sh"
    if not ok:
        if os.environ.get("LLMSCHED_REQUIRE_VLLM") == "1":
            pytest.fail(f"LLMSCHED_REQUIRE_VLLM=1 but {why}")
        pytest.skip(why)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_members(pgid: int) -> list[str]:
    """Live (non-zombie) processes of process group ``pgid``, as 'pid state command'."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(f"{pid} {fields[0]} {stat.split(' ', 1)[1].split(')')[0]})")
    return out


class Server:
    """A vLLM server started in its own session (so it and its engine-core child form one process group)."""

    def __init__(self, cmd: list[str], env: dict, log_path, port: int):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.leftovers: list[str] | None = None

    def log_tail(self, n: int = 4000) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-n:]

    def wait_ready(self, timeout: float) -> float:
        """Seconds until ``/health`` answers 200; raises with the log's tail if the server exits or times out."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return time.monotonic() - t0
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        raise TimeoutError(f"vLLM server not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, timeout: float = 30.0) -> list[str]:
        """SIGTERM the process group, SIGKILL what is left after ``timeout``; returns what survived even that."""
        if self.leftovers is not None:
            return self.leftovers
        pgid = self.proc.pid
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.proc.wait(10)
        deadline = time.monotonic() + timeout  # the engine core shuts down after the API server
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if group_members(pgid):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            time.sleep(1.0)
        self.leftovers = group_members(pgid)
        self._log.close()
        return self.leftovers


# --- the servers of tests/test_vllm_serve.py ------------------------------------------------------------------
# One policy per scheduler family, each with its defaults (no parameters); the first is tier-aware.
SERVE_FAMILIES = ("slai-priority", "vllm", "sarathi", "fairbatching-pab", "rad", "deferred-prefill", "infermax",
                  "nested-wait")
# TBT targets a loaded 2-core machine can keep while another test worker runs beside it: with a tiny model's CPU steps
# taking up to ~1 s there, FairBatching's PAB (which refuses a request it cannot serve within its target) refused
# every free request at 0.5 s. The tiers themselves are what the test checks, not the targets' values.
SERVE_TIERS = "paid:tbt=1:share=0.05,free:tbt=5"
# PAB admits against node-wide SLOs (ttft_slo 0.5 s, tpot_slo 50 ms by default: a GPU's), not the tiers'. A loaded
# CPU engine's steps take up to ~1 s, so with its defaults PAB refuses most of the concurrent requests (CI run of
# ed09462: a free completion refused; of 85ce232: 7 of the adapter test's 10). The tests give it SLOs of the CPU's
# scale (the server through the plug-in's own variable).
CPU_SCALE_PARAMS = {"fairbatching-pab": {"ttft_slo": 10.0, "tpot_slo": 0.5}}
SERVE_PARAMS = {name: json.dumps(params) for name, params in CPU_SCALE_PARAMS.items()}
SERVE_TEST = "test_vllm_serve.py"
_started: list[Server] = []


def launch_server(workdir, policy: str = SERVE_FAMILIES[0]) -> Server:
    """Start the plug-in's server with ``policy`` on the tiny model in ``workdir`` (model, records, logs, temp)."""
    from llmsched.vllm.launch import EngineConfig, serve_command, serve_env
    from llmsched.vllm.model import write_model
    model = write_model(workdir / "tiny")
    cfg = EngineConfig(model=str(model), max_model_len=512, max_num_seqs=16, max_num_batched_tokens=256,
                       kv_cache_mb=16)
    env = serve_env(str(workdir), {"LLMSCHED_SCHEDULER": policy, "LLMSCHED_TIERS": SERVE_TIERS,
                                   "LLMSCHED_RECORD_DIR": str(workdir / "records"),
                                   "LLMSCHED_PROFILES": str(workdir / "profiles"),
                                   **({"LLMSCHED_SCHEDULER_PARAMS": SERVE_PARAMS[policy]}
                                      if policy in SERVE_PARAMS else {})})
    port = free_port()
    srv = Server(serve_command(cfg, port), env, workdir / f"server-{port}.log", port)
    srv.model, srv.records, srv.policy = str(model), workdir / "records", policy
    _started.append(srv)
    return srv


def launch_kv_instance(workdir, model, role: str, policy: str, store, max_num_batched_tokens: int) -> Server:
    """One instance of a served 1P1D pair: the plug-in's server running ``policy``, a KV producer or consumer
    (``role``) of ``ExampleConnector`` over the folder ``store``; its records in ``workdir/role/records``
    (``server.records``)."""
    from llmsched.vllm.launch import EngineConfig, serve_command, serve_env
    cfg = EngineConfig(model=str(model), max_model_len=512, max_num_seqs=16,
                       max_num_batched_tokens=max_num_batched_tokens, kv_cache_mb=16)
    env = serve_env(str(workdir / role), {"LLMSCHED_SCHEDULER": policy,
                                          "LLMSCHED_RECORD_DIR": str(workdir / role / "records"),
                                          "LLMSCHED_PROFILES": str(workdir / role / "profiles")})
    kv = {"kv_connector": "ExampleConnector", "kv_role": role,
          "kv_connector_extra_config": {"shared_storage_path": str(store)}}
    port = free_port()
    srv = Server(serve_command(cfg, port) + ["--kv-transfer-config", json.dumps(kv)], env,
                 workdir / f"{role}.log", port)
    srv.model, srv.records = str(model), workdir / role / "records"
    return srv


def prestart_server(request, tmp_path_factory) -> None:
    """Start the serve test's first server now if this session will run that test (see the module docstring)."""
    if _started or not any(SERVE_TEST in item.nodeid for item in request.session.items):
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):  # in parallel runs the serve test may run in another worker
        return
    launch_server(tmp_path_factory.mktemp("vllm-serve"))


def take_server(tmp_path_factory, timeout: float, policy: str = SERVE_FAMILIES[0]) -> Server:
    """The started server of ``policy`` once ready (started now if none is); retried on a port taken meanwhile."""
    ready = [s for s in _started if s.policy == policy and s.leftovers is None]
    srv = ready[-1] if ready else launch_server(tmp_path_factory.mktemp("vllm-serve"), policy)
    for _ in range(3):
        try:
            srv.wait_ready(timeout)
            return srv
        except RuntimeError:
            srv.stop()
            if "address already in use" not in srv.log_tail().lower():
                raise
            srv = launch_server(tmp_path_factory.mktemp("vllm-serve"), policy)
    srv.wait_ready(timeout)
    return srv


@atexit.register
def _stop_all() -> None:
    for srv in _started:
        srv.stop(timeout=10)
