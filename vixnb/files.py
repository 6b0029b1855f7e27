"""Files written whole or not at all: one file (``atomic_write``), a file under a name no other process takes
(``write_new``), several files that replace several (``replace_set``); the temporary files and folders a process
makes are named with its PID (``temp_prefix``), so that the next command removes what an ended one left
(``remove_leftovers``); a full disk is one error, naming the path, from every writer (``no_space``, ``writing``)."""
import contextlib
import errno
import itertools
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

from .errors import StoreError, say_once

#: the errors of a full disk, or of a full quota: one error everywhere (``no_space``)
FULL_DISK = tuple(getattr(errno, name) for name in ("ENOSPC", "EDQUOT") if hasattr(errno, name))

#: what a process names its temporary files and folders: ``.<name>.pid<PID>-<random><suffixes>`` (``temp_prefix``)
LEFTOVER = re.compile(r"^\.(?P<name>.+)\.pid(?P<pid>\d+)-[0-9A-Za-z_]+(?:\.[0-9A-Za-z_-]+)*$")
#: a leftover of an ended process younger than this is left alone (a clock's skew, a process of another machine
#: that shares the folder and is starting); older, it is removed
LEFTOVER_AGE_S = 60


def temp_prefix(name):
    """The prefix of a temporary file or folder for ``name`` made by this process: ``.<name>.pid<PID>-`` (hidden;
    ``remove_leftovers`` recognises it once the process has ended)."""
    return f".{name}.pid{os.getpid()}-"


def process_alive(pid):
    """Whether process ``pid`` is running on this machine (a zombie, ended and not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it runs
        return True
    except (OverflowError, ValueError):
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def leftovers(folder, *, name=None):
    """The temporary files and folders in ``folder`` (those of ``name`` only, where given) that a process which has
    ended left there (``LEFTOVER``; at least ``LEFTOVER_AGE_S`` old)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found, now = [], time.time()
    for entry in names:
        if not entry.startswith(".") or ".pid" not in entry or not (m := LEFTOVER.match(entry)):
            continue
        if (name is not None and m["name"] != name) or int(m["pid"]) == os.getpid() or process_alive(int(m["pid"])):
            continue
        path = Path(folder) / entry
        try:
            if now - path.lstat().st_mtime >= LEFTOVER_AGE_S:
                found.append(path)
        except OSError:
            continue
    return found


def remove_leftovers(folder, *, name=None):
    """Remove ``leftovers(folder, name=name)`` (a temporary file of a write that was killed, a staging folder of an
    interrupted unpack, a rehearsal's scratch store), each named once on stderr; what cannot be removed is named."""
    removed = []
    for path in leftovers(folder, name=name):
        pid = LEFTOVER.match(path.name)["pid"]
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError as e:
            say_once(f"leftover {path}", f"{path} was left by process {pid}, which has ended, and cannot be removed "
                                         f"({e.strerror or e}); remove it by hand")
            continue
        say_once(f"leftover {path}", f"removed {path}, left by process {pid}, which ended before it finished")
        removed.append(path)
    return removed


class CountedFile:
    """A file that counts what is written to it and keeps the ``OSError`` a write raised (a writer that wraps it in
    its own error, torch's "unexpected pos", still shows a full disk as one)."""

    def __init__(self, file):
        self._file, self.written, self.error = file, 0, None

    def write(self, data):
        self.written += len(data)
        try:
            return self._file.write(data)
        except OSError as e:
            self.error = e
            raise

    def __getattr__(self, name):
        return getattr(self._file, name)


def _full(error, counted=None):
    """Whether ``error`` (or an ``OSError`` a counted file saw before it) is a full disk or quota."""
    seen = counted.error if counted is not None and counted.error is not None else error
    return isinstance(seen, OSError) and seen.errno in FULL_DISK


def _write_temp(path, write, *, binary, size):
    """Write ``write(file)`` into a new temporary file beside ``path`` (``temp_prefix``), flushed to the disk; its path.
    A full disk is ``no_space``; nothing is left behind on any failure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(path.parent)
    tmp, counted = None, None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path.name), suffix=".tmp")
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would hide the file from the other users of a store
        with os.fdopen(fd, "wb" if binary else "w") as f:
            counted = CountedFile(f)
            write(counted)
            flush(f)
    except BaseException as e:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if _full(e, counted):
            raise no_space(path, size if size is not None else counted.written if counted else None) from None
        raise
    return Path(tmp)


def atomic_write(path, write, *, binary=False, size=None, keep_previous=None):
    """Write ``path`` through ``write(file)`` into a temporary file beside it, then ``os.replace``: readers
    see the old file or the whole new one, never a part; concurrent writers each finish their own file.
    ``keep_previous``: where the file it replaces is kept, linked there only once the new one is whole, so that an
    interruption at any point (a signal during a long write) leaves ``path`` on disk.

    A full disk is a ``StoreError`` naming the path and about how much it needs (``size`` where the caller knows it,
    else what was written when the disk filled) and what is free (``no_space``); the old file stays whole."""
    path = Path(path)
    tmp = _write_temp(path, write, binary=binary, size=size)
    try:
        if keep_previous is not None and path.exists():
            _keep(path, Path(keep_previous))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_new(path, write, *, binary=False, size=None, alternatives=()):
    """Write a file at ``path`` only where none is there, else at the first of ``alternatives`` (other paths) where
    none is: the whole file appears at once under a name no other process takes (a hard link of the finished
    temporary file, which fails where the name exists), so two processes never both write one name. Returns the
    path written; ``FileExistsError`` where every name is taken."""
    path = Path(path)
    tmp = _write_temp(path, write, binary=binary, size=size)
    try:
        for candidate in itertools.chain([path], map(Path, alternatives)):
            candidate.parent.mkdir(parents=True, exist_ok=True)
            try:
                _link_new(tmp, candidate)
                return candidate
            except FileExistsError:
                continue
        raise FileExistsError(errno.EEXIST, "every name is taken", str(path))
    finally:
        tmp.unlink(missing_ok=True)


def _link_new(tmp, path):
    """Give the whole file ``tmp`` the name ``path`` where it is free (``FileExistsError`` where it is taken): a hard
    link; where the file system has none, ``path`` is claimed by an exclusive create, then replaced by ``tmp``."""
    try:
        os.link(tmp, path)
        return
    except FileExistsError:
        raise
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK, errno.ENOSYS):
            raise
    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666 & ~_umask()))  # ours from here on
    os.replace(tmp, path)


#: the signals a replacement of several files holds back until it is done (``signals_held``)
HELD_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def signals_held():
    """SIGINT, SIGTERM and SIGHUP wait until this ends, then act as they would have (in the main thread, where
    Python runs its handlers; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got = []
    before = {signum: signal.signal(signum, lambda signum, frame: got.append(signum)) for signum in HELD_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(got):
            signal.raise_signal(signum)


def replace_set(old, new):
    """Replace the files ``old`` (paths) by ``new`` (``[(finished temporary file, final path)]``), a reader seeing the
    old set or the new one: the new files are complete before this is called, and the renames that put them in place
    and the removal of the old ones not replaced run with signals held (``signals_held``): only a kill that cannot
    be caught (SIGKILL, a power cut) lands between them."""
    finals = {Path(final) for _, final in new}
    with signals_held():
        for tmp, final in new:
            os.replace(tmp, final)
        for path in map(Path, old):
            if path not in finals:
                path.unlink(missing_ok=True)


def _keep(path, previous):
    """Make ``previous`` the file now at ``path``, which stays there too (a hard link; where the file system has
    none, a rename, after which ``path`` is absent only until the caller's replace that follows)."""
    link = previous.with_name(f"{temp_prefix(previous.name)}link")
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
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=temp_prefix(path.name), suffix=".tmp"):
            pass
    except OSError as e:
        raise ValueError(f"{option} {path}: cannot write there ({e.strerror or e}); give a file path in a writable "
                         "folder") from None


def flush(f):
    """Flush the open file ``f`` to the disk (``fsync``)."""
    f.flush()
    os.fsync(f.fileno())


def megabytes(n):
    """``n`` bytes in MB for a message: ``0.02 MB``, ``3.4 MB``, ``61 MB``."""
    mb = n / 1e6
    return f"{mb:.0f} MB" if mb >= 10 else f"{mb:.1f} MB" if mb >= 0.1 else f"{max(mb, 0.01):.2f} MB"


def no_space(path, needed=None, *, fix="free some space, or set VIXNB_RESULTS to a folder on a disk with room"):
    """The one error of a full disk or quota (``FULL_DISK``), from every writer: a ``StoreError`` ``no space left to
    write <path> (needs about N MB, M MB free); <fix>``. ``needed``: the bytes the write needs (None: unknown)."""
    try:
        free = shutil.disk_usage(Path(path).parent).free
    except OSError:
        free = None
    about = [f"needs about {megabytes(needed)}" if needed else "",
             f"{megabytes(free)} free" if free is not None else ""]
    shown = ", ".join(a for a in about if a)
    error = StoreError(f"no space left to write {path}{f' ({shown})' if shown else ''}; {fix}")
    error.errno = errno.ENOSPC
    return error


@contextlib.contextmanager
def writing(path, needed=None, *, fix="free some space, and run it again"):
    """Around a writer that is not ``atomic_write``'s (torch's, papermill's, a tar stream's): a full disk or quota
    it meets, however it wraps it, is ``no_space(path, needed)``. ``needed``: the bytes it writes, where known."""
    try:
        yield
    except StoreError:
        raise
    except BaseException as e:
        cause = e
        while cause is not None and not (isinstance(cause, OSError) and cause.errno in FULL_DISK):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
        raise no_space(path, needed, fix=fix) from None


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
