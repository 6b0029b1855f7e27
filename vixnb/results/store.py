"""The results store: one JSON file per training run, keyed by a hash of the run's configuration.

Layout: ``<root>/<profile>/<model>-<dataset>-seed<seed>-<hash>.json``. Results of GPU profiles live in
the repository's ``results/`` (so the book can be rebuilt on a CPU from them); ``results/smoke/`` is
git-ignored. Writes are atomic (temporary file + ``os.replace``), so a crash never leaves half a file
and two processes finishing the same run leave one complete file.
"""
import hashlib
import json
import os
import tempfile
from pathlib import Path

from ..paths import checkout_root


def atomic_write(path, write, *, binary=False):
    """Write ``path`` through ``write(file)`` into a temporary file beside it, then ``os.replace``: readers
    see the old file or the whole new one, never a part; concurrent writers each finish their own file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def config_key(config):
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:16]


def default_root():
    """``$VIXNB_RESULTS`` if set, else ``results/`` of the checkout (``paths.checkout_root``), else of the cwd."""
    if "VIXNB_RESULTS" in os.environ:
        return Path(os.environ["VIXNB_RESULTS"])
    repo = checkout_root()
    return (repo if repo is not None else Path.cwd()) / "results"


class ResultsStore:
    def __init__(self, root=None):
        self.root = Path(root) if root is not None else default_root()

    def path(self, config):
        name = f"{config['model']}-{config['dataset']}-seed{config['seed']}-{config_key(config)}.json"
        return self.root / config["profile"] / name

    def checkpoint_path(self, config):
        """Where an unfinished run of ``config`` keeps its per-epoch checkpoint (removed when it finishes)."""
        path = self.path(config)
        return path.parent / ".checkpoints" / (path.stem + ".pt")

    def get(self, config):
        path = self.path(config)
        if not path.exists():
            return None
        result = json.loads(path.read_text())
        if result.get("config") != config:
            raise ValueError(f"{path} holds a different configuration than its name says: delete it and re-run")
        return result

    def put(self, config, result):
        return atomic_write(self.path(config), lambda f: json.dump({**result, "config": config}, f, indent=1, sort_keys=True))

    def results(self, profile=None):
        folders = [self.root / profile] if profile else sorted(p for p in self.root.glob("*") if p.is_dir())
        return [json.loads(p.read_text()) for folder in folders for p in sorted(folder.glob("*.json"))]

    def holds_profile(self, profile):
        """Whether the store holds any result of ``profile``: a training run or a saved measurement
        (``vixnb.measure.save_measurements``, under ``<profile>/measure/``)."""
        return any((self.root / profile).rglob("*.json"))
