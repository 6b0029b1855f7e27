"""Stored benchmark results (``results/bench/<name>.json`` in the results store, committed): what the book
shows of GPU benchmarks. A saved benchmark is one JSON object with the keys ``benchmark`` (its kind:
"mixers", "train", "nystrom-variants", "fill"), ``provenance``, ``command``, ``note``, any extra fields, and
``rows``."""
import json
import sys

import pandas as pd

from ..files import atomic_write
from ..measure import jsonable, provenance
from ..results import ResultsStore
from .fill import APPROACHES
from .mixers import with_ratios


def benchmark_record(benchmark, rows, *, device, dtype, note=None, command=None, extra=None):
    """What is saved of a run of ``benchmark``: its ``rows`` with their provenance (device, dtype, torch,
    commit, date; ``vixnb.measure.provenance``), the command line that made them (default: ``vixnb`` and
    this process's arguments), a ``note`` and any ``extra`` fields."""
    command = command or ("vixnb " + " ".join(sys.argv[1:]) if sys.argv[1:] else None)
    return {"benchmark": benchmark, "provenance": provenance(device, dtype=dtype), "command": command,
            "note": note, **jsonable(extra or {}), "rows": jsonable(rows)}


def save(name, record, root=None):
    """Store ``record`` (``benchmark_record``) as the benchmark ``name`` (``results/bench/<name>.json``)."""
    return ResultsStore(root).save_record("bench", name, record)


def write(path, record):
    """Write ``record`` (``benchmark_record``) to the file ``path``, in the store's format (the command line's
    ``--json``/``--save``; copy it to ``results/bench/`` to commit it)."""
    data = json.dumps(record, indent=1, sort_keys=True)
    return atomic_write(path, lambda f: f.write(data))


def stored_path(name, root=None):
    """``results/bench/<name>.json`` of the results store (``store.default_root``), or under ``root``."""
    return ResultsStore(root).record_path("bench", name)


def newest(prefix, root=None):
    """The saved benchmark named ``prefix-N`` with the largest N (e.g. the latest ``nystrom-variants-N`` run),
    or ``prefix`` itself when there is none (``stored_table`` then reads "not yet run")."""
    return ResultsStore(root).newest_record("bench", prefix)


def load(name, root=None):
    """A saved benchmark by name, or None when there is none."""
    return ResultsStore(root).load_record("bench", name)


def _with_provenance(frame, saved):
    """``frame.attrs["provenance"]``: the saved provenance, with the saved note (for
    ``report.records.provenance_line``)."""
    note = saved.get("note")
    frame.attrs["provenance"] = {**saved["provenance"], **({"note": note} if note else {})}
    return frame


def stored_table(name, root=None):
    """The saved benchmark ``name`` (``results/bench/<name>.json``) as a page table (``mixers_frame``,
    ``train_frame`` or ``variants_frame`` by its kind), or a one-cell "not yet run" table; ``attrs["provenance"]``
    is the saved provenance with the saved note (None when not run)."""
    saved = load(name, root)
    if saved is None:
        frame = pd.DataFrame({"status": [f"not yet run (no results/bench/{name}.json)"]}, index=[name])
        frame.attrs["provenance"] = None
        return frame
    make = {"mixers": mixers_frame, "train": train_frame, "nystrom-variants": variants_frame,
            "fill": fill_frame}[saved["benchmark"]]
    return make(saved)


def variants_frame(saved):
    """tools/profile_nystrom.py output: one row per variant, ms and ratio to the fused softmax per dtype."""
    frame = pd.DataFrame(saved["rows"]).pivot(index="mechanism", columns="dtype", values=["ms", "x_fused_softmax"])
    frame.columns = [f"{'ms' if what == 'ms' else 'x fused softmax'} ({dt})" for what, dt in frame.columns]
    order = list(dict.fromkeys(r["mechanism"] for r in saved["rows"]))
    frame = frame.loc[order]
    return _with_provenance(frame, saved)


def mixers_frame(saved):
    """A saved ``vixnb bench mixers`` run as a page table: ms (median), ratios to the fused and the
    materialised softmax, peak MiB; ``attrs["provenance"]`` as saved (``_with_provenance``)."""
    rows = with_ratios([dict(r) for r in saved["rows"]])  # runs saved before the fused ratio was stored
    frame = pd.DataFrame({
        "ms (fwd+bwd)": [r["ms"] for r in rows],
        "x fused softmax": [r["ratio_vs_fused_softmax"] for r in rows],
        "x materialised softmax": [r["ratio_vs_materialized_softmax"] for r in rows],
        "peak MiB": [r["peak_mb"] for r in rows],
        "params": [r["params"] for r in rows]}, index=[r["mechanism"] for r in rows])
    if any(r.get("aten_ops") for r in rows):  # runs saved before the count was added have none
        frame.insert(3, "aten ops (non-view)", [r.get("aten_ops_compute") for r in rows])
    return _with_provenance(frame, saved)


def train_frame(saved):
    """A saved ``vixnb bench train`` run as a page table (one row per model)."""
    rows = saved["rows"]
    frame = pd.DataFrame({
        "batch": [r["batch_size"] for r in rows],
        "reference img/s": [r.get("reference_images_per_s") for r in rows],
        f"ours img/s ({rows[0]['dtype'] if rows else ''})": [r.get("ours_images_per_s") for r in rows],
        "ratio": [r.get("ratio") for r in rows],
        "ours img/s (fp32)": [r.get("ours_paper_dtype_images_per_s") for r in rows],
        "paper protocol, min (projected, fp32)": [r.get("projected_paper_minutes") for r in rows]},
        index=[r["model"] for r in rows])
    return _with_provenance(frame, saved)


def fill_frame(saved):
    """A saved ``vixnb bench fill`` run as a page table: one row per model, images/s of each approach and its
    ratio to one seed, and the winner."""
    rows = saved["rows"]
    columns = {"batch": [r["batch_size"] for r in rows], "seeds": [r["seeds"] for r in rows]}
    for approach in APPROACHES:
        columns[f"{approach} img/s"] = [r.get(f"{approach}_images_per_s") for r in rows]
        if approach != "one_seed":
            columns[f"{approach} x one seed"] = [r.get(f"{approach}_vs_one_seed") for r in rows]
    columns["winner"] = [r.get("winner") for r in rows]
    return _with_provenance(pd.DataFrame(columns, index=[r["model"] for r in rows]), saved)
