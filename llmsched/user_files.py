"""A user's file read as text, with one error for one that cannot be read: what it is, where, and why."""
from __future__ import annotations

from pathlib import Path


def read_user_file(path: Path, what: str) -> str:
    """The text of ``path``; a file that cannot be read is a ValueError naming ``what`` it is and the path."""
    try:
        return path.read_text()
    except OSError as e:
        raise ValueError(f"cannot read {what} {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{what} {path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start}); save "
                         f"it as UTF-8") from None


def csv_number(path: Path, line: int, row: dict, column: str, kind, positive: bool, file_kind: str) -> int | float:
    """``row[column]`` of a user's CSV file as a finite ``kind`` (int or float), positive or >= 0, else a ValueError
    naming the file, line and column (``file_kind``, e.g. "Vidur mlp.csv", says what a whole row holds)."""
    text = row.get(column)
    try:
        value = kind(text)
    except (TypeError, ValueError):
        value = None
    if value is None or not ((0 < value) if positive else (0 <= value)) or not value < float("inf"):
        wanted = f"a positive {'whole number' if kind is int else 'number'}" if positive else "a number >= 0"
        raise ValueError(f"{path} line {line}: {column} is {text!r}, not {wanted} (a {file_kind} row has every "
                         f"column; a truncated file ends mid-row)")
    return value
