"""What the command-line tests share: a command that must refuse its input in one line."""
from llmsched.cli import main


def one_line_error(args, capsys) -> str:
    """Run ``llmsched ARGS`` in-process; it must fail with exit code 2 and one line on stderr, no traceback."""
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, f"exit code {code}; stderr: {err}"
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err
