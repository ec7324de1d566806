"""A process pool broken by a Ctrl-C ends the command as interrupted; one broken otherwise says so.

A Ctrl-C reaches the workers and the command together, and a worker it ends can break the pool before the command
has raised its own KeyboardInterrupt (CI saw ``llmsched capacity`` end with a BrokenProcessPool traceback, status 1,
instead of "interrupted", status 130). Each case runs in a process of its own: the signals are real."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import os, signal, subprocess, sys
    from concurrent.futures.process import BrokenProcessPool
    from llmsched.executors import LocalExecutor

    def die(i, how=sys.argv[1]):
        if i == 0:
            if how == "ctrl-c":  # the command's share of the Ctrl-C lands just after the worker's end broke the pool
                subprocess.Popen(["sh", "-c", f"sleep 0.05; kill -INT {os.getppid()}"])
            os.kill(os.getpid(), signal.SIGKILL)
        return i

    try:
        LocalExecutor(2).map(die, range(4))
    except KeyboardInterrupt:
        print("interrupted")
    except BrokenProcessPool:
        print("broken")
""")


def run(how: str) -> str:
    out = subprocess.run([sys.executable, "-c", SCRIPT, how], capture_output=True, text=True, timeout=120)
    return out.stdout.strip()


def test_a_ctrl_c_that_broke_the_pool_is_an_interrupt():
    assert run("ctrl-c") == "interrupted"


def test_a_pool_broken_otherwise_is_raised_as_it_was():
    assert run("killed") == "broken"
