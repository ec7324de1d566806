"""Every bad input in tests/data/bad_inputs.toml ends in one line on stderr naming it, exit code 2, no traceback.

The CLI runs in-process (llmsched.cli.main), so the whole table takes seconds; a case whose input is wrongly
accepted would start a run and fail on its output or exit code.
"""
import shlex
import tomllib
from pathlib import Path

import pytest

from llmsched.cli import main
from tests.colocated_only import NAME as COLOCATED_ONLY  # registers the policy the decode-pool cases refuse
from tests.conftest import shared_data_dir

TABLE = tomllib.loads((Path(__file__).parent / "data" / "bad_inputs.toml").read_text())
KINDS = ("cli", "config", "trace", "model", "gpu", "settings", "serving")


def cases():
    for kind in KINDS:
        for i, case in enumerate(TABLE[kind]):
            label = case.get("args") or " ".join(f"{k}={v}" for k, v in case["env"].items())
            yield pytest.param(kind, case, id=f"{kind}-{i}-{label[:60]}")


def expected(case, file: Path | None) -> list[str]:
    want = case["expect"] if isinstance(case["expect"], list) else [case["expect"]]
    return [w.replace("{file}", str(file)) for w in want]


def write_input(case, tmp_path: Path) -> Path | None:
    if "files" in case:  # a run folder: {file} is the folder
        folder = tmp_path / case.get("folder", "run")
        folder.mkdir()
        for name, text in case["files"].items():
            (folder / name).write_text(text)
        return folder
    if "name" not in case:
        return None
    path = tmp_path / case["name"]
    path.write_bytes(case["text"].encode(case.get("encoding", "utf-8")))
    return path


def test_the_table_is_large_and_covers_every_kind():
    assert sum(len(TABLE[k]) for k in KINDS) >= 150
    assert all(TABLE[k] for k in KINDS)
    args = [c["args"] for k in ("cli", "config", "trace", "model", "gpu") for c in TABLE[k]]
    texts = [(c["args"], c["name"], c.get("text")) for k in ("config", "trace", "model", "gpu") for c in TABLE[k]
             if "name" in c]
    assert len(set(a for a in args if "{file}" not in a)) == len([a for a in args if "{file}" not in a])
    assert len(set(texts)) == len(texts)


def test_the_decode_pool_cases_refuse_a_policy_the_tests_registered():
    """Every built-in policy runs a decode pool, so those refusals name one of the tests' own."""
    from llmsched.schedulers.registry import create_scheduler
    assert not create_scheduler(COLOCATED_ONLY).serves_transferred_kv
    assert sum(COLOCATED_ONLY in c.get("args", "") for kind in KINDS for c in TABLE[kind]) == 4


@pytest.mark.parametrize("kind, case", list(cases()))
def test_bad_input_gets_one_line_naming_it(kind, case, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # anything a wrongly accepted run writes lands here
    monkeypatch.delenv("LLMSCHED_DATA", raising=False)
    file = write_input(case, tmp_path)
    if kind == "settings":
        from llmsched.schedulers.registry import create_scheduler
        from llmsched.vllm.settings import load_settings
        env = {k: v.replace("{file}", str(file)) for k, v in case["env"].items()}
        with pytest.raises(ValueError) as info:
            settings = load_settings(env)  # what the plug-in does at start-up, before it serves
            create_scheduler(settings.scheduler, **settings.scheduler_params)
        message = str(info.value)
        assert "\n" not in message.strip(), message
    else:
        args = shlex.split(case["args"].replace("{file}", str(file)))
        if args[0] in ("simulate", "compare", "sweep"):
            args.append("--no-progress")
        code = main(args)
        err = capsys.readouterr().err
        if ("not found; looked in" in err and shared_data_dir() is None
                and not any("not found" in w for w in expected(case, file))):
            pytest.skip("the case reads a file of ../shared/data, which is absent")
        assert code == 2, f"exit code {code}; stderr: {err}"
        assert "Traceback" not in err
        assert len(err.strip().splitlines()) == 1, err
        message = err
        assert err.startswith("llmsched"), err
    for want in expected(case, file):
        assert want in message, f"{want!r} not in: {message}"


def test_no_absolute_paths_of_one_machine_in_the_product():
    root = Path(__file__).resolve().parents[1]
    files = [p for d in ("llmsched", "docs", "scripts", "benchmarks") for p in (root / d).rglob("*")
             if p.is_file() and p.suffix in (".py", ".md", ".json", ".toml", ".txt")]
    files += [root / "README.md"]
    bad = [f"{p.relative_to(root)}: {marker}" for p in files for marker in ("/work/", "/root/", "/home/")
           if marker in p.read_text(errors="ignore")]
    assert not bad, bad
