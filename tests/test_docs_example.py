"""The scheduler example in docs/architecture.md runs as written."""
import re
from pathlib import Path

from llmsched.request import Status

from conftest import make_requests, run_sim


def test_architecture_doc_example_scheduler_runs():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    code = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    namespace = {}
    exec(compile(code, "docs/architecture.md", "exec"), namespace)
    reqs = make_requests(100, rate=5.0)
    run_sim("decode-first", reqs)
    assert all(r.status is Status.FINISHED for r in reqs)
