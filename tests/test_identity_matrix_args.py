"""scripts/identity_matrix.py's own input: an ``--only`` that names no row is a one-line error naming the flag,
not a traceback from writing the digests of no run into a folder never made."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "identity_matrix.py"


def test_an_only_that_names_no_row_is_refused_with_the_flag(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("identity_matrix", SCRIPT)
    matrix = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(matrix)
    with pytest.raises(SystemExit) as e:
        matrix.main(["run", str(tmp_path / "out"), "--only", "disagg"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--only 'disagg' names no config" in err and "fleet__1P1D-sarathi-code" in err
    assert not (tmp_path / "out").exists()
