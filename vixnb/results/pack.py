"""What a lent machine sends back, and how it is taken in here: ``pack`` and ``unpack`` (``vixnb unpack``).

The device returns at most ``RETURN_FILES`` files of at most ``RETURN_FILE_MIB`` MiB each. ``pack`` writes one
``.tar.gz`` stream split into parts that each stay under that size (``<name>.part1of3``, ...; a pack that fits one
part is the one file ``<name>``), so that a paused run's checkpoint of up to about 60 MiB travels. It chooses the
files first: results and records (never left out), failed jobs' logs, kept weights, then the paused runs'
checkpoints, smallest first, while the parts stay within their count; it says what it left out and why.

``unpack`` joins the parts (it refuses an incomplete set) and writes each file where it belongs, with one rule:
nothing here is replaced silently. A file that is the same here is left alone; a result or record that differs
from the one here is written beside it, under ``results/.conflicts/<time>/...``, and both are named with their
dates (the one here stays in place, whichever is newer); a paused run's checkpoint is replaced only by a newer one.
"""
from __future__ import annotations

import glob
import io
import json
import os
import re
import secrets
import tarfile
import tempfile
import time
import zlib
from pathlib import Path, PurePosixPath

from ..errors import StoreError
from ..files import (FULL_DISK, atomic_write, no_space, remove_leftovers, replace_set, temp_prefix, write_new,
                     writing)
from .layout import LEDGER, store_kind
from .store import default_root, writable_folder

RETURN_FILES = 8  # the most files a device call brings back
RETURN_FILE_MIB = 16  # the largest file a device call brings back
PART_BYTES = RETURN_FILE_MIB * 2**20 - 64 * 1024  # a part's size, a little under the limit
#: the largest paused checkpoint a pack is sure to carry beside a call's results (``batch.least_seconds``: a run
#: whose checkpoint is larger starts only where it fits whole)
TRAVEL_MB = 60
_PART = re.compile(r"^(?P<base>.+)\.part(?P<k>\d+)of(?P<n>\d+)$")


def _tar_bytes(size):
    """The bytes a file of ``size`` bytes takes in a tar stream: a header block and its data in 512-byte blocks."""
    return 512 + -(-size // 512) * 512


class _Parts(io.RawIOBase):
    """A write-only stream cut into files ``<base>.partN`` of at most ``part_bytes`` each."""

    def __init__(self, base, part_bytes):
        self.base, self.part_bytes, self.paths, self._file, self._left = Path(base), part_bytes, [], None, 0

    def writable(self):
        return True

    def write(self, data):
        view, done = memoryview(data), 0
        while done < len(view):
            if self._left == 0:
                self._next()
            n = min(self._left, len(view) - done)
            self._file.write(view[done:done + n])
            done, self._left = done + n, self._left - n
        return done

    def _next(self):
        if self._file is not None:
            self._file.close()
        self.paths.append(self.base.with_name(f"{self.base.name}.part{len(self.paths) + 1}"))
        self._file, self._left = open(self.paths[-1], "wb"), self.part_bytes

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None
        super().close()


def _choose(musts, optional, capacity):
    """``(chosen, left out)``: every file of ``musts`` and, in their order, those of ``optional`` (``[(path, why
    it may be dropped)]``) while the estimated stream stays within ``capacity`` bytes."""
    total = 2 * 10240 + sum(_tar_bytes(f.stat().st_size) for f in musts)
    chosen, left = list(musts), []
    for f, what in optional:
        size = _tar_bytes(f.stat().st_size)
        if total + size <= capacity:
            chosen.append(f)
            total += size
        else:
            left.append((f, what))
    return chosen, left


def pack(path, profile, *, limit_mb=None, jobs=(), since=None, max_parts=RETURN_FILES - 2,
         part_bytes=PART_BYTES):
    """Write what a session must bring back as ``path`` (one part) or ``path.part1ofN``... (at most ``max_parts``
    files of at most ``part_bytes`` each; default: the device's limits, two files left for the session's log and the
    engine probe's record, ``engine_choice.json``): the profile's results with their kept weights, its measurements,
    the benchmark records, the probe's ledger and failed jobs' logs, then
    paused runs' checkpoints while they fit (``limit_mb``: at most that many MiB in all). ``since`` (seconds since the
    epoch): only what was written from then on. Paths inside are the checkout's (``results/...``): ``unpack`` them.
    Returns ``(part paths, packed names, left-out names with why)``; a result is never left out (a ``RuntimeError``
    names them where they alone would not fit)."""
    root = default_root()
    base = root  # the store's folder: its files are packed as results/...
    unfit = []  # what unpack would refuse: named, never packed
    new = (lambda f: True) if since is None else (lambda f: f.stat().st_mtime >= since)
    results = [f for f in _packable(sorted((root / profile).glob("*.json")), root, unfit) if new(f)]
    ledger = [root / LEDGER] if (root / LEDGER).exists() or (root / LEDGER).is_symlink() else []
    records = [f for f in _packable(sorted((root / profile / "measure").glob("*.json")) +
                                    sorted((root / "bench").glob("*.json")) + ledger, root, unfit) if new(f)]
    logs = [Path(j.log) for j in jobs if j.outcome == "failed" and j.log and Path(j.log).is_file()]
    weights = [w for r in results if (w := root / profile / "weights" / f"{r.stem}.pt").is_file() and new(w)]
    checkpoints = sorted((p for p in _packable(sorted((root / profile / ".checkpoints").glob("*.pt")), root, unfit)
                          if not p.name.endswith(".previous.pt")),
                         key=lambda p: p.stat().st_size)
    capacity = max_parts * part_bytes * 0.995 - 65536  # gzip of incompressible data grows it a little
    if limit_mb is not None:
        capacity = min(capacity, limit_mb * 2**20)
    limit_note = f"the {limit_mb:g} MiB limit" if limit_mb is not None and limit_mb * 2**20 < max_parts * part_bytes \
        else f"{max_parts} files of {part_bytes / 2**20:.1f} MiB"
    optional = [(f, "kept weights") for f in weights] + [(c, "paused run's checkpoint") for c in checkpoints]
    chosen, left = _choose(results + records + logs, optional, capacity)
    if chosen == results + records + logs and sum(_tar_bytes(f.stat().st_size) for f in chosen) > capacity:
        raise RuntimeError(f"the results alone do not fit in {limit_note}: {len(chosen)} files; pack fewer "
                           "(--pack-since) or bring them back in several calls")
    while True:
        staged, packed = _stage(path, chosen, base, part_bytes)
        if len(staged) <= max_parts:
            break
        for part in staged:
            part.unlink(missing_ok=True)
        droppable = [f for f in chosen if f.suffix == ".pt"]  # the estimate was short: drop the largest optional file
        if not droppable:
            raise RuntimeError(f"the results alone took {len(staged)} parts, over {max_parts}")
        drop = max(droppable, key=lambda f: (".checkpoints" in f.parts, f.stat().st_size))
        chosen.remove(drop)
        left.append((drop, "kept weights" if "weights" in drop.parts else "paused run's checkpoint"))
    parts = _commit(path, staged)
    notes = unfit + [f"{_name(f, base)} ({f.stat().st_size / 2**20:.0f} MiB {what}: over {limit_note})"
                     for f, what in left]
    return parts, packed, notes


def _packable(files, root, unfit):
    """Those of ``files`` (of the store at ``root``) that ``unpack`` takes: a file of one of the store's shapes
    (``store_kind``), a link to a file being packed as the file it links to; each other one is named in ``unfit``
    (a link to nothing, a folder, a name of no shape), and left here as it is."""
    out = []
    for f in files:
        name = _name(f, root)
        if store_kind(f.relative_to(root).as_posix()) is None:
            unfit.append(f"{name} (its name is none of a stored file's: left here)")
        elif not f.is_file():
            why = "a link to nothing" if f.is_symlink() and not f.exists() else "not a file"
            unfit.append(f"{name} ({why}: left here)")
        else:
            out.append(f)
    return out


def _name(f, root):
    """A file's name in the pack: ``results/<its path in the store>`` whatever the store's folder is called (a
    rehearsal's scratch store too), else ``logs/<name>``."""
    return f"results/{f.relative_to(root).as_posix()}" if f.is_relative_to(root) else f"logs/{f.name}"


def _stage(path, files, base, part_bytes):
    """Write ``files`` as one tar.gz stream into parts beside ``path``, under temporary names of this process
    (``files.temp_prefix``; ``_commit`` gives them their names): ``(staged part paths, names)``. A link is packed as
    the file it links to (a regular file: ``unpack`` takes no link). A full disk names ``path``; what was staged is
    removed on any failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(path.parent, name=path.name)  # the staged parts of an earlier pack that was killed
    stream, names = _Parts(path.with_name(temp_prefix(path.name) + secrets.token_hex(4)), part_bytes), []
    try:
        with writing(path, sum(_tar_bytes(f.stat().st_size) for f in files)), \
                tarfile.open(fileobj=stream, mode="w:gz", compresslevel=1) as tar:
            for f in files:
                names.append(_name(f, base))
                with open(f, "rb") as source:  # what it holds, a link's target's (fstat): a regular file
                    tar.addfile(tar.gettarinfo(arcname=names[-1], fileobj=source), source)
        stream.close()
    except BaseException:
        stream.close()
        for part in stream.paths:
            part.unlink(missing_ok=True)
        raise
    return stream.paths, names


def _commit(path, staged):
    """Give the staged parts their names (``path`` alone, or ``path.partKofN``) and remove the pack written there
    before, whole (``files.replace_set``: a reader finds the old pack or the new one, never a part of each)."""
    path = Path(path)
    final = [path] if len(staged) == 1 else \
        [path.with_name(f"{path.name}.part{i}of{len(staged)}") for i, _ in enumerate(staged, 1)]
    old = [p for p in (path, *path.parent.glob(f"{glob.escape(path.name)}.part*"))
           if p.is_file() and (p == path or _PART.match(p.name))]
    replace_set(old, list(zip(staged, final)))
    return final


# ----- unpacking ---------------------------------------------------------------------------------------------

def archives(files):
    """``[[part paths in order]]``: ``files`` grouped into archives (a whole ``.tar.gz``, or every part of one);
    a ``ValueError`` names an archive whose parts are not all given."""
    groups = {}
    for f in map(Path, files):
        if not f.is_file():
            raise ValueError(f"{f}: no such file; give the pack's files "
                             "(results.tar.gz, or every results.tar.gz.partKofN)")
        m = _PART.match(f.name)
        key, k, n = (f.with_name(m["base"]), int(m["k"]), int(m["n"])) if m else (f, 1, 1)
        group = groups.setdefault(key, {"n": n, "parts": {}})
        if group["n"] != n:
            raise ValueError(f"{f}: its parts say {n} parts, another says {group['n']}; give the parts of one pack")
        group["parts"][k] = f
    out = []
    for key, group in groups.items():
        missing = [k for k in range(1, group["n"] + 1) if k not in group["parts"]]
        if missing:
            raise ValueError(f"{key.name}: parts {', '.join(map(str, missing))} of {group['n']} are missing; "
                             f"give every {key.name}.partKof{group['n']}")
        out.append([group["parts"][k] for k in range(1, group["n"] + 1)])
    return out


class _Joined(io.RawIOBase):
    """The parts of one archive read as one stream."""

    def __init__(self, paths):
        self._paths, self._file = list(paths), None

    def readable(self):
        return True

    def readinto(self, buffer):
        while True:
            if self._file is None:
                if not self._paths:
                    return 0
                self._file = open(self._paths.pop(0), "rb")
            n = self._file.readinto(buffer)
            if n:
                return n
            self._file.close()
            self._file = None


#: a failed job's log in a pack: ``logs/<name>``, one plain name
_LOG = re.compile(r"^logs/[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def _target(name, root):
    """Where the archive member ``name`` goes, or a ``ValueError`` for any other name than those ``pack`` writes:
    ``results/<a file of the store's shapes>`` (``store.store_kind``: a result, a measurement, a benchmark, kept
    weights, a paused run's checkpoint, the ledger) into the results store ``root``, ``logs/<name>`` beside it."""
    parts = PurePosixPath(name).parts
    if not parts or parts[0] not in ("results", "logs") or ".." in parts or PurePosixPath(name).is_absolute():
        raise ValueError(f"archive member {name!r}: not a results/ or logs/ path; not a pack of vixnb batch")
    if parts[0] == "results" and store_kind(name[len("results/"):]) is None:
        raise ValueError(f"archive member {name!r}: not a file of the store's shapes (a profile's results, "
                         "measurements, weights or checkpoints, the benchmarks, the probe's ledger); not a pack of "
                         "vixnb batch")
    if parts[0] == "logs" and not _LOG.match(name):
        raise ValueError(f"archive member {name!r}: not a log's name; not a pack of vixnb batch")
    return root.joinpath(*parts[1:]) if parts[0] == "results" else root.parent.joinpath(*parts)


def _when(data, mtime):
    """A stored file's date for a message: its provenance's (a result or record), else its modification time."""
    try:
        prov = json.loads(data).get("provenance") or {}
        stamp = prov.get("finished") or prov.get("date") or prov.get("measured")
        if stamp:
            return str(stamp)
    except (ValueError, UnicodeDecodeError, AttributeError):
        pass
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))


#: the largest member a pack may hold (a paused run's checkpoint travels at up to about 60 MiB) and the most its
#: members may hold together (a call returns at most 8 files of 16 MiB, some of it compressed JSON): a pack that
#: would expand beyond either is refused before anything is written
MAX_MEMBER_BYTES = 256 * 2**20
MAX_UNPACKED_BYTES = 2 * 2**30
UNPACK_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError, ValueError)


class _Refused(ValueError):
    """A member of a pack that ``unpack`` does not take (said in the pack's one-line error)."""


def _read_packs(files, root, staging):
    """Every member of the packs ``files``, checked and copied into ``staging`` before anything is written to the
    store: ``[(member name, target, staged path, mtime)]``. A pack that is not one (a plain tar, a truncated or
    misordered part, gzip noise), a member outside ``results/`` and ``logs/``, one whose place in the store is a
    folder (or under a file), or one over ``MAX_MEMBER_BYTES`` (or all over ``MAX_UNPACKED_BYTES``) is a
    ``ValueError`` naming the pack, the member and the fix; nothing is written then."""
    planned, total = [], 0
    for parts in archives(files):
        shown = parts[0].name if len(parts) == 1 else f"{_PART.match(parts[0].name)['base']} ({len(parts)} parts)"
        try:
            with tarfile.open(fileobj=_Joined(parts), mode="r|gz") as tar:
                for member in tar:
                    if member.isdir():
                        continue
                    if not member.isfile():
                        raise _Refused(f"member {member.name!r} is not a plain file (a link or a device)")
                    try:
                        target = _target(member.name, root)
                    except ValueError as e:
                        raise _Refused(str(e)) from None
                    if target.is_dir() or any(p.is_file() for p in target.parents if p != target and
                                              root in (p, *p.parents)):
                        raise _Refused(f"member {member.name!r} would replace a folder of the store (or sit under "
                                         "a file)")
                    if member.size > MAX_MEMBER_BYTES:
                        raise _Refused(f"member {member.name!r} holds {member.size / 2**20:,.0f} MiB, over the "
                                         f"{MAX_MEMBER_BYTES / 2**20:.0f} MiB a pack of vixnb batch holds")
                    total += member.size
                    if total > MAX_UNPACKED_BYTES:
                        raise _Refused(f"its members hold over {MAX_UNPACKED_BYTES / 2**30:.0f} GiB, more than a pack "
                                         "of vixnb batch")
                    staged = staging / f"{len(planned)}"
                    with tar.extractfile(member) as source, open(staged, "wb") as out:
                        while chunk := source.read(2**20):
                            out.write(chunk)
                    if staged.stat().st_size != member.size:
                        raise _Refused(f"member {member.name!r} is cut short")
                    planned.append((member.name, target, staged, member.mtime))
        except StoreError:
            raise
        except UNPACK_ERRORS as e:
            if isinstance(e, OSError) and e.errno in FULL_DISK:  # the staging folder's disk is full
                raise no_space(staging, total) from None
            why = e if isinstance(e, _Refused) else \
                f"not a pack of vixnb batch, or a part is truncated or out of order ({type(e).__name__}: {e})"
            raise ValueError(f"{shown}: {why}; nothing was unpacked. Give the .tar.gz that `vixnb batch --pack` "
                             "wrote (or every one of its parts, unchanged)") from None
    return planned


def _beside(path):
    """``path`` with ``.2``, ``.3`` ... before its suffixes: the names a differing copy may take where ``path`` is
    taken (``files.write_new`` takes the first free one, so that two unpacks at once never share one)."""
    n = 2
    while True:
        yield path.with_name(f"{path.name.split('.')[0]}.{n}{''.join(path.suffixes)}")
        n += 1


def unpack(files, *, root=None):
    """Take in the packs ``files`` (``vixnb unpack``): ``{"written", "same", "replaced", "conflicts"}``, names
    per outcome; ``conflicts`` holds ``(here, kept beside as, message)`` for each file that differs from the one
    here (see the module's docstring: nothing is replaced silently). Every pack is read and checked whole first
    (``_read_packs``: into a staging folder in the store); nothing is written where one of them is refused."""
    root = Path(root) if root is not None else default_root()
    writable_folder(root)  # before reading anything: a read-only store is named, not an errno of a temporary file
    if (root / ".conflicts").exists() and not (root / ".conflicts").is_dir():
        raise StoreError(f"{root / '.conflicts'} is a file; the differing copies a pack brings are kept in that "
                         "folder: move the file away and unpack again")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    report = {"written": [], "same": [], "replaced": [], "conflicts": []}
    remove_leftovers(root, name="unpack")  # the staging folder of an unpack that was killed
    with tempfile.TemporaryDirectory(prefix=temp_prefix("unpack"), dir=root) as staging:
        for name, target, staged, mtime in _read_packs(files, root, Path(staging)):
            data = staged.read_bytes()
            try:  # claimed only where no file is: another unpack at once may have written it first
                write_new(target, lambda f, data=data: f.write(data), binary=True, size=len(data))
                os.utime(target, (mtime, mtime))
                report["written"].append(name)
                continue
            except FileExistsError:
                pass
            try:
                here = target.read_bytes()
            except OSError:  # a link to nothing here: the pack's copy is kept beside it, never over it
                here = None
            if here == data:
                report["same"].append(name)
                continue
            if here is not None and ".checkpoints" in target.parts and mtime > target.stat().st_mtime:
                atomic_write(target, lambda f, data=data: f.write(data), binary=True, size=len(data))
                os.utime(target, (mtime, mtime))
                report["replaced"].append(name)
                continue
            beside = write_new(root / ".conflicts" / stamp / name, lambda f, data=data: f.write(data), binary=True,
                               size=len(data), alternatives=_beside(root / ".conflicts" / stamp / name))
            os.utime(beside, (mtime, mtime))
            when_here = _when(here, target.stat().st_mtime) if here is not None else "unreadable here"
            when_packed = _when(data, mtime)
            newer = ("the one here cannot be read" if here is None else
                     "the pack's is newer" if when_packed > when_here else "the one here is newer")
            report["conflicts"].append((str(target), str(beside), f"{target} differs from the pack's copy: kept "
                                        f"both, the one here ({when_here}) in place and the pack's ({when_packed}) "
                                        f"as {beside} ({newer}); keep one and delete the other"))
    return report
