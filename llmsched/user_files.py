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
