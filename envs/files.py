"""Writing files that people name: whole or not at all, never through a link or into a FIFO."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["replace_file"]


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a new file in the same folder, renamed into place.

    The name may be taken only by a regular file with one link (it is replaced: its other
    names, if any, would keep the old text, so a hard link is refused too); a symbolic link, a
    FIFO, a device, a socket or a folder of that name is refused with an OSError saying what it
    is. Nothing is ever opened through the existing name.

    Raises:
        OSError: the name is taken by something else, or the folder cannot be written.
    """
    def check() -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        what = ("a symbolic link" if stat.S_ISLNK(st.st_mode) else "a folder" if stat.S_ISDIR(st.st_mode)
                else None if stat.S_ISREG(st.st_mode) else "not a regular file (a FIFO, device or socket)")
        if what is None and st.st_nlink != 1:
            what = f"a file with {st.st_nlink} hard links (replacing one name would leave the others)"
        if what is not None:
            raise OSError(errno.EEXIST, f"the name is taken by {what}", str(path))

    check()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        check()             # again, just before the rename (the name may have changed meanwhile)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
