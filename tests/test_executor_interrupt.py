"""Ctrl-C and the probes' process pool: a command that ignores Ctrl-C keeps its workers ignoring it.

A command started where SIGINT is ignored (in the background, or under a parent that ignores it, as CI's runner
did) never raises KeyboardInterrupt; its workers used to reset Ctrl-C to end them, so a Ctrl-C sent to the group
ended the workers alone and the command died of a BrokenProcessPool traceback, status 1. Each case runs in a
session of its own, so the Ctrl-C it sends reaches only its own process group."""
import signal
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, signal, time
    from llmsched.executors import LocalExecutor

    def work(i):
        if i == 0:
            os.killpg(os.getpgid(0), signal.SIGINT)  # Ctrl-C to the command and its workers
        time.sleep(0.3)
        return i

    try:
        print(LocalExecutor(2).map(work, range(4)))
    except KeyboardInterrupt:
        print("interrupted")
""")


def run(sigint) -> str:
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                         start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
    return out.stdout.strip()


def test_a_command_that_ignores_ctrl_c_finishes_its_pools_work():
    assert run(signal.SIG_IGN) == "[0, 1, 2, 3]"


def test_a_command_that_takes_ctrl_c_is_interrupted():
    assert run(signal.SIG_DFL) == "interrupted"
