"""Files written whole or not at all (``atomic_write``): the results store's, the data cache's, the plan's."""
import os
import tempfile
from pathlib import Path


def atomic_write(path, write, *, binary=False):
    """Write ``path`` through ``write(file)`` into a temporary file beside it, then ``os.replace``: readers
    see the old file or the whole new one, never a part; concurrent writers each finish their own file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would hide the file from the other users of a store
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask():
    """The process's umask, read without changing it (``os.umask`` can only be read by setting it)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022
