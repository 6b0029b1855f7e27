"""Measurement records as flat rows and pandas DataFrames, for the pages."""
from __future__ import annotations

import pandas as pd

#: The column of the favor paper's FLOP convention (its name is what the efficiency chapter reads).
FAVOR_GFLOPS_COLUMN = "GFLOPs (favor convention)"


def short_status(status):
    """A record's status in a table cell: "n/a (cpu)", "skipped (budget)", "oom", ..., "-" for none."""
    if status is None:
        return "-"
    if status.startswith("skipped: CUDA"):
        return "n/a (cpu)"
    if status.startswith("skipped"):
        return "skipped (budget)"
    return status


def summary_row(rec):
    """One flat dict of a ``measure`` record (for tables and DataFrames)."""
    if "flops" not in rec:
        return {"model": rec.get("model"), "status": rec.get("status")}
    counted = rec["flops"]
    favor_gflops = counted["favor_gflops"] if "favor_gflops" in counted else counted["seed003_gflops"]  # older records
    row = {"model": rec["model"], "params (paper)": rec["params_paper"], "params (true)": rec["params_true"],
           "Size MB": rec["size_mb"], "GMACs": counted["gmacs"], "GFLOPs": counted["gflops"],
           FAVOR_GFLOPS_COLUMN: favor_gflops, "batch": rec["batch_size"]}
    for path in rec.get("training", {}):
        tr, inf, tp = rec["training"][path], rec["inference"][path], rec["throughput"][path]
        row[f"train GB ({path})"] = tr.get("peak_reserved_gb") if tr["status"] == "ok" else short_status(tr["status"])
        row[f"train GB alloc ({path})"] = (tr.get("peak_allocated_gb") if tr["status"] == "ok"
                                           else short_status(tr["status"]))
        row[f"train step ms ({path})"] = tr.get("step_ms")
        b64 = next((b for b in inf.get("batches", []) if b["batch_size"] == 64), None)
        row[f"infer GB @64 ({path})"] = (b64.get("peak_allocated_gb") if b64 and b64["status"] == "ok"
                                         else short_status(b64["status"] if b64 else None))
        row[f"img/s ({path})"] = tp.get("images_per_s")
        row[f"ms per image ({path})"] = 1e3 / tp["images_per_s"] if tp.get("images_per_s") else None
        row[f"img/s batch ({path})"] = tp.get("batch_size")
    row["device"] = rec["provenance"]["device"]
    return row


def records_frame(records):
    """A pandas DataFrame of ``measure`` records, one row per model."""
    if not records:
        return pd.DataFrame(index=pd.Index([], name="model"))
    return pd.DataFrame([summary_row(r) for r in records]).set_index("model")


def crossover_frame(xs, *, metrics=None):
    """``crossovers`` output as a table: one row per mechanism, one column per (reference, metric), cells
    "~N tokens" (interpolated crossover), "from N" (first measured size where cheaper, no interpolation),
    "all sizes", "none up to N", "only at N1, N2" (cheaper at those small sizes, not at the largest) or "-"."""
    cells = {}
    for x in xs:
        if metrics and x["metric"] not in metrics:
            continue
        if x["status"] == "crosses":
            cell = f"~{x['crossover_tokens']:.0f} tokens" if x["crossover_tokens"] else f"from {x['cheaper_from']}"
        elif x["status"].startswith("cheaper at every"):
            cell = "all sizes"
        elif x["status"].startswith("not cheaper up to"):
            cell = f"none up to {x['tokens'][-1]}"
        elif x["status"].startswith("not cheaper at"):
            cell = f"only at {', '.join(map(str, x['cheaper_at']))}"
        else:
            cell = "-"
        cells.setdefault(x["mechanism"], {})[(f"vs {x['reference']}", x["metric"])] = cell
    frame = pd.DataFrame.from_dict(cells, orient="index")
    if not frame.empty:
        frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame
