"""The README's compare table is the output of the command it documents (regenerate: scripts/readme_table.py)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_script():
    spec = importlib.util.spec_from_file_location("readme_table", ROOT / "scripts" / "readme_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_compare_table_matches_the_documented_command():
    script = load_script()
    readme = (ROOT / "README.md").read_text()
    assert script.rewrite(readme, script.table()) == readme, (
        "README.md's compare table is stale: run `python scripts/readme_table.py` and commit README.md")


def test_rewrite_replaces_only_the_marked_block():
    script = load_script()
    text = f"before\n{script.START}\nold\n{script.END}\nafter\n"
    out = script.rewrite(text, "NEW TABLE")
    assert out.startswith("before\n") and out.endswith("\nafter\n") and "old" not in out
    assert f"$ {script.COMMAND}\nNEW TABLE\n" in out
