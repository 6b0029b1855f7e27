"""The results store: training runs, measurements and benchmarks, one JSON file each.

Layout:
- training runs: ``<root>/<profile>/<model>-<dataset>-seed<seed>-<hash>.json``, keyed by a hash of the run's
  configuration (``config_key``); an unfinished run's checkpoint is ``<root>/<profile>/.checkpoints/``; a run's
  kept weights (a run whose ``RunSpec.keep`` is ``"store"``), float16, are
  ``<root>/<profile>/weights/<result stem>.pt``, committed with the results (unlike checkpoints), their SHA-256 recorded
  in the result; ``keep_weights="local"`` keeps them in ``<root>/<profile>/.weights-local/`` instead, on this machine
  only (never committed nor packed: a warm start's large source);
- measurements: ``<root>/<profile>/measure/<name>.json``;
- benchmarks: ``<root>/bench/<name>.json``.

Where each file goes and the one check of a file that every reader makes (``read_json``) are ``layout``'s.

What a caller reads or makes is the compute policy's (``runs.policy``). Results of GPU profiles live in
the repository's ``results/`` (so the book can be rebuilt on a CPU from them); ``results/smoke/`` is
git-ignored. Writes are atomic (temporary file + ``os.replace``), so a crash never leaves half a file
and two processes finishing the same run leave one complete file.
"""
import hashlib
import io
import json
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import torch

from ..errors import StoreError, printable, say_once
from ..files import atomic_write, temp_prefix
from ..paths import results_root
from ..validate import Invalid, env_text
from .layout import config_key  # noqa: F401  (the store's key, ``store.config_key`` to its readers)
from .layout import RECORD_GROUPS, UnusableFile, check_file, damage, damaged_result, read_json, result_path


BATCH_LOCK = ".locks/batch.lock"  # in the store's root (git-ignored, as the runs' locks): held by its running batch
def default_root():
    """``$VIXNB_RESULTS`` if set (empty is unset; a file there is a usage error naming it, ``validate.Invalid``, as
    every variable of the environment), else ``results/`` of the checkout (``paths.checkout_root``), else of the cwd
    (``paths.results_root``; a file there is a ``StoreError``)."""
    root = results_root()
    if root.exists() and not root.is_dir():
        message = (f"VIXNB_RESULTS={root} is a file, not a folder; point VIXNB_RESULTS at the results store's folder "
                   "(or unset it for results/ of the checkout)")
        raise Invalid(message) if env_text("VIXNB_RESULTS") is not None else StoreError(message)
    return root


def writable_folder(where):
    """Make folder ``where`` of the store where it is missing, and check that a file can be written there, else a
    ``StoreError`` naming it and the fix."""
    try:
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=where, prefix=temp_prefix("writable")):
            pass
    except OSError as e:
        raise StoreError(f"results store folder {where} is not writable ({e.strerror or e}); fix its "
                         "permissions or set VIXNB_RESULTS to a writable folder") from None


class ResultsStore:
    def __init__(self, root=None):
        self.root = Path(root) if root is not None else default_root()

    def path(self, config):
        """Where the result of run config ``config`` is (``result_path`` under the store's root)."""
        return self.root / result_path(config)

    def checkpoint_path(self, config):
        """Where an unfinished run of ``config`` keeps its per-epoch checkpoint (removed when it finishes)."""
        path = self.path(config)
        return path.parent / ".checkpoints" / (path.stem + ".pt")

    def weights_path(self, config, *, local=False):
        """Where a run's kept weights are: ``<profile>/weights/<result stem>.pt``; ``local``: in
        ``<profile>/.weights-local/``, kept on this machine only (never committed nor packed; no size cap)."""
        path = self.path(config)
        return path.parent / (".weights-local" if local else "weights") / (path.stem + ".pt")

    def save_weights(self, config, state, *, local=False):
        """Write ``state`` (a state dict) to ``weights_path`` in float16 (floating tensors cast, integer buffers as
        they are), atomically; return the record its result keeps under ``"weights"`` (``file`` relative to the
        profile's folder)."""
        half = {k: v.detach().to("cpu", torch.float16 if v.is_floating_point() else v.dtype, copy=True)
                for k, v in state.items()}
        buffer = io.BytesIO()
        torch.save(half, buffer)
        data = buffer.getvalue()
        path = atomic_write(self.weights_path(config, local=local), lambda f: f.write(data), binary=True,
                            size=len(data))
        return {"file": path.relative_to(self.root / config["profile"]).as_posix(),
                "sha256": hashlib.sha256(data).hexdigest(), "dtype": "float16", "bytes": len(data)}

    def weights_missing(self, config, result):
        """Why the stored ``result`` of ``config`` has no kept weights here, or None where its file is present."""
        record = result.get("weights")
        if not record:
            return "keeps no weights"
        return None if (self.root / config["profile"] / record["file"]).is_file() else \
            f"lacks its weights file {record['file']}"

    def load_weights(self, config):
        """The kept weights of ``config``'s run (a state dict of float16 tensors on the CPU), or None where its
        result or their file is absent; a ``StoreError`` where the file does not match the recorded SHA-256."""
        result = self.get(config)
        if result is None or self.weights_missing(config, result):
            return None
        path = self.root / config["profile"] / result["weights"]["file"]
        if hashlib.sha256(path.read_bytes()).hexdigest() != result["weights"]["sha256"]:
            raise StoreError(f"weights file {path} does not match the SHA-256 its result records; delete it and train "
                             "again (a run that keeps its weights, `vixnb train ... --keep-weights`, trains a result "
                             "whose weights are missing)")
        return torch.load(path, weights_only=True, map_location="cpu")

    def get(self, config):
        path = self.path(config)
        if not path.exists():
            return None
        result = read_json(path, check=False)
        if isinstance(result, dict) and result.get("config") != config:
            raise StoreError(f"{path} holds a different configuration than its name says; delete it and run again")
        if (why := check_file(path, result)) is not None:
            raise damaged_result(path, why)
        return result

    def check_writable(self, config):
        """Raise ``StoreError`` now, before any training, when ``config``'s result, checkpoint or lock could not
        be written."""
        folder = self.path(config).parent
        # the folder, and its checkpoints' and locks' folders where they are already there (else made in it)
        for where in [folder] + [f for f in (self.checkpoint_path(config).parent, self.lock_path(config).parent)
                                 if f.is_dir()]:
            writable_folder(where)

    @contextmanager
    def batch_lock(self):
        """Hold the store's batch lock (``BATCH_LOCK``, an advisory ``flock`` with the holder's PID in it) while a
        batch runs on it; a ``StoreError`` naming the running batch's PID where another holds it. The system releases
        it when the holder ends, however it ends."""
        path = Path(self.root) / BATCH_LOCK
        try:
            import fcntl  # optional dependency: missing on Windows
        except ImportError:  # no flock (Windows): nothing is checked
            yield
            return
        writable_folder(path.parent)
        with open(path, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                pid = handle.read().strip() or "unknown"
                raise StoreError(f"results store {self.root}: another vixnb batch (PID {pid}) is running on this "
                                 f"store; wait for it to end, or stop it (kill {pid}) and run this again") from None
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            try:
                yield
            finally:
                handle.seek(0)
                handle.truncate()
                fcntl.flock(handle, fcntl.LOCK_UN)

    def lock_path(self, config):
        """The run's lock file, ``<profile>/.locks/<result stem>.lock`` (git-ignored, like checkpoints)."""
        path = self.path(config)
        return path.parent / ".locks" / (path.stem + ".lock")

    def lock_held(self, config):
        """Whether another process holds ``config``'s lock now (it is computing that run)."""
        try:
            import fcntl  # optional dependency: missing on Windows
        except ImportError:
            return False
        path = self.lock_path(config)
        if not path.is_file():
            return False
        try:
            handle = open(path, "a")
        except OSError:  # a lock that cannot be opened holds nothing (``lock`` names it)
            return False
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
        return False

    @contextmanager
    def lock(self, config):
        """Hold the run's lock (``lock_path``, an advisory ``flock``) while it is computed; yields True
        when another process held it first (its result may be stored now)."""
        path = self.path(config)
        lock = self.lock_path(config)
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            handle = open(lock, "a")
        except OSError as e:  # a derived file: named once, and the run computed without it
            say_once(f"lock {lock}", f"{lock} cannot be used as a lock ({type(e).__name__}); {path.name} is computed "
                                     "without one (remove it to use locks again)")
            yield False
            return
        with handle:
            try:
                import fcntl  # optional dependency: missing on Windows
            except ImportError:  # no flock (Windows): nothing to wait for
                yield False
                return
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                waited = False
            except BlockingIOError:
                print(f"vixnb: {path.name} is being computed by another process; waiting for it", file=sys.stderr,
                      flush=True)
                fcntl.flock(handle, fcntl.LOCK_EX)
                waited = True
            try:
                yield waited
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def put(self, config, result):
        whole = {**result, "config": config}
        size = len(json.dumps(whole, indent=1, sort_keys=True).encode())  # what a full disk's message says it needs
        return atomic_write(self.path(config), lambda f: json.dump(whole, f, indent=1, sort_keys=True), size=size)

    def results(self, profile=None, *, unusable=damage):
        """Every stored training run of ``profile`` (default: of every profile) that ``unusable`` (why a run read back
        cannot be used, or None; default ``damage``; ``runs.policy.unusable`` adds what this vixnb cannot use) lets
        through; a file that cannot be used is left out (``read_json`` and its ``check_file``: ``get`` names it where
        a run asks for it, ``unusable_files`` lists it, ``vixnb plan`` shows it as not used)."""
        folders = [self.root / profile] if profile else sorted(p for p in self.root.glob("*") if p.is_dir())
        found = []
        for path in (p for folder in folders for p in sorted(folder.glob("*.json"))):
            try:
                result = read_json(path)
            except StoreError:
                continue
            if unusable(result) is None:
                found.append(result)
        return found

    def unusable_files(self, profile, *, unusable=damage):
        """``[(path relative to the store, why)]``: each file of ``profile``'s training runs, measurements (and of
        the benchmarks) that cannot be used (what ``read_json`` refuses: not JSON, a folder, a link to nothing, a key
        given twice, what ``check_file`` finds; or what ``unusable`` says of a training run: with
        ``runs.policy.unusable`` a model no longer registered, a newer engine, an unknown configuration key).
        Nothing is deleted: ``vixnb plan`` lists each as "not used"."""
        out = []
        for folder, training in ((self.root / profile, True), (self.root / profile / "measure", False),
                                 (self.root / "bench", False)):
            for path in sorted(folder.glob("*.json")):
                try:
                    record = read_json(path)
                    why = unusable(record) if training else None
                except UnusableFile as e:
                    why = e.why
                if why:
                    out.append((path.relative_to(self.root).as_posix(), why))
        return out

    def devices(self, profile):
        """The devices that made the stored results of ``profile`` (training runs and measurements), as their
        provenance names them, most results first."""
        counts = {}
        for path in (self.root / profile).rglob("*.json"):
            try:
                device = ((read_json(path).get("provenance") or {}).get("device"))
            except (StoreError, AttributeError):  # unreadable, or not a mapping: not a result
                continue
            if device:
                counts[device] = counts.get(device, 0) + 1
        return sorted(counts, key=lambda d: -counts[d])

    def holds_profile(self, profile):
        """Whether the store holds any result of ``profile``: a training run or a saved measurement
        (``vixnb.measure.save_measurements``, under ``<profile>/measure/``)."""
        return any((self.root / profile).rglob("*.json"))

    # ----- measurements and benchmarks: named records --------------------------------------------------

    def record_path(self, group, name, *, profile=None):
        """``<profile>/measure/<name>.json`` for a measurement, ``bench/<name>.json`` for a benchmark."""
        if group not in RECORD_GROUPS:
            raise ValueError(f"group={group!r}: use one of {', '.join(RECORD_GROUPS)}")
        if group == "measure":
            if profile is None:
                raise ValueError("a measurement belongs to a profile: pass profile=")
            return self.root / profile / "measure" / f"{name}.json"
        return self.root / "bench" / f"{name}.json"

    def save_record(self, group, name, obj, *, profile=None):
        data = json.dumps(obj, indent=1, sort_keys=True)
        return atomic_write(self.record_path(group, name, profile=profile), lambda f: f.write(data),
                            size=len(data.encode()))

    def load_record(self, group, name, *, profile=None, strict=False):
        """The saved record, or None when there is none, or where its file cannot be used (``read_json``'s check:
        named once on stderr as not used, and kept as it is). ``strict``: such a file is an ``UnusableFile`` (a
        ``StoreError``) instead: for the plan, which lists it as damaged, and the compute policy, which never makes
        a record over it."""
        path = self.record_path(group, name, profile=profile)
        if not (path.exists() or path.is_symlink()):
            return None
        try:
            return read_json(path)
        except UnusableFile as e:
            if strict:
                raise
            say_once(f"not used {path}", f"not used: {printable(path)}: {printable(e.why)}; it is left as it is "
                                         "(move or delete it to silence this)")
            return None

    def newest_record(self, group, prefix, *, profile=None):
        """The name of the saved record ``prefix-N`` with the largest N, or ``prefix`` when there is none."""
        folder = self.record_path(group, prefix, profile=profile).parent
        found = {int(p.stem.rsplit("-", 1)[1]): p.stem for p in folder.glob(f"{prefix}-*.json")
                 if p.stem.rsplit("-", 1)[1].isdigit()}
        return found[max(found)] if found else prefix
