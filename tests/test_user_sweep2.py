"""Cases a second user sweep of the commands, the library API and validate-serving's inputs found: each failed
before its fix (see the commit that added it)."""
import pytest

from llmsched.cli import main


def one_line_error(args, capsys) -> str:
    """Run ``llmsched ARGS`` in-process; it must fail with exit code 2 and one line on stderr, no traceback."""
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, f"exit code {code}; stderr: {err}"
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_sweep_with_tenants_names_the_rates_the_user_gave(capsys):
    """`sweep --rates 1,2 --tenants ...` said 'drop --rate', an option the user never gave."""
    err = one_line_error(["sweep", "--rates", "1,2", "--tenants", "a:rate=1,b:rate=2", "--num-requests", "10",
                          "--no-progress"], capsys)
    assert "--rates does not apply together with --tenants" in err
    assert "--rate " not in err and "--rate;" not in err and not err.rstrip().endswith("--rate")


def test_make_model_over_a_file_names_the_path_and_the_fix(tmp_path, capsys):
    """`make-model --out EXISTING_FILE` said only 'File exists'."""
    pytest.importorskip("tokenizers")
    file = tmp_path / "model"
    file.write_text("")
    err = one_line_error(["make-model", "--out", str(file)], capsys)
    assert f"--out {file}" in err and "give a new or existing directory" in err
    err = one_line_error(["make-model", "--out", str(file / "sub")], capsys)
    assert f"({file} is a file)" in err
