"""Files written whole or not at all (``atomic_write``): the results store's, the data cache's, the plan's."""
import errno
import os
import shutil
import tempfile
from pathlib import Path

from .errors import StoreError


def atomic_write(path, write, *, binary=False, size=None, keep_previous=None):
    """Write ``path`` through ``write(file)`` into a temporary file beside it, then ``os.replace``: readers
    see the old file or the whole new one, never a part; concurrent writers each finish their own file.
    ``keep_previous``: where the file it replaces is kept, linked there only once the new one is whole, so that an
    interruption at any point (a signal during a long write) leaves ``path`` on disk.

    A full disk is a ``StoreError`` naming the path, the bytes needed (``size`` where the caller knows them,
    else at least those written so far) and the bytes free (``no_space``); the old file stays whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would hide the file from the other users of a store
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
            flush(f)
        if keep_previous is not None and path.exists():
            _keep(path, Path(keep_previous))
        os.replace(tmp, path)
    except BaseException as e:
        written = Path(tmp).stat().st_size if Path(tmp).exists() else 0
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            raise no_space(path, size if size is not None else written, at_least=size is None) from None
        raise
    return path


def _keep(path, previous):
    """Make ``previous`` the file now at ``path``, which stays there too (a hard link; where the file system has
    none, a rename, after which ``path`` is absent only until the caller's replace that follows)."""
    link = previous.with_name(f".{previous.name}.{os.getpid()}.link")
    try:
        link.unlink(missing_ok=True)
        os.link(path, link)
        os.replace(link, previous)
    except OSError:
        link.unlink(missing_ok=True)
        os.replace(path, previous)


def check_writable_file(path, option):
    """Raise a ``ValueError`` naming ``option`` now, before any work, where the file ``path`` could not be written
    (a folder in its way that is a file, a folder that cannot be made or written, a folder at the path itself)."""
    path = Path(path)
    try:
        if path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "it is a folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"):
            pass
    except OSError as e:
        raise ValueError(f"{option} {path}: cannot write there ({e.strerror or e}); give a file path in a writable "
                         "folder") from None


def flush(f):
    """Flush the open file ``f`` to the disk (``fsync``)."""
    f.flush()
    os.fsync(f.fileno())


def no_space(path, needed, *, at_least=False):
    """The ``StoreError`` of a full disk under ``path``: the path, the bytes needed and the bytes free."""
    try:
        free = shutil.disk_usage(Path(path).parent).free
    except OSError:
        free = None
    error = StoreError(f"no space left on the device to write {path}: it needs {'at least ' if at_least else ''}"
                       f"{needed:,} bytes, {'an unknown number of' if free is None else f'{free:,}'} bytes are free; "
                       "free some space, or set VIXNB_RESULTS to a folder on a disk with room")
    error.errno = errno.ENOSPC
    return error


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
