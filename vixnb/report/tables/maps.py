"""The maps study's arithmetic for its page: per-layer means over heads, the approximations' error curves, the
randomisation checks, the attribution methods' agreement and their deletion / insertion curves and areas. Each
function reads the runs of a stored study record (``analysis.study_runs``: ``{label: run}``, a run with its
``status`` and, where done, its measures) and returns what a figure or table of the page draws."""
from __future__ import annotations

import statistics

import pandas as pd
from IPython.display import Markdown

from ...analysis.records import study_record_name
from .pages import not_yet_run

#: the attribution methods of the study, in the order the page shows them, with their short names
ATTRIBUTION_METHODS = {"integrated_gradients": "IG", "occlusion": "Occlusion", "grad_cam": "Grad-CAM"}
#: the per-layer measures of the attention maps: {axis title: the run's measure}
MAP_MEASURES = {"row entropy / log N": "entropy", "diagonal prominence": "prominence",
                "attention distance (pixels)": "distance_px"}


def not_measured(measurement, profile):
    """Why the page shows no ``measurement`` of the study (attention / attribution), and the command that makes
    it."""
    return Markdown(not_yet_run(f"`vixnb batch --profile {profile} --only {study_record_name(measurement)}` (after "
                                "the runs whose weights it reads; "
                                f"`vixnb plan --profile {profile}` gives the GPU time)"))


def map_cell(run, value):
    """A run's map for a figure's cell (``value(run)``), or its status where it is not done."""
    return value(run) if run["status"] == "done" else run["status"]


def rollout_rows(runs, count):
    """``{label: [the run's attention rollout of panel image k, k < count]}`` (its status in each cell where the
    run is not done), the rows of ``map_grid``."""
    return {label: [map_cell(run, lambda r, k=k: r["rollout"][k]) for k in range(count)] for label, run in runs.items()}


def centre_query_rows(runs, labels):
    """``{label: [the centre patch's row of the first panel image, per layer]}`` of the runs of ``labels`` (its
    status in each cell where the run is not done), as many columns as the deepest done run has layers; ``{}``
    where none of them is done."""
    chosen = {label: run for label, run in runs.items() if label in labels}
    depths = [len(run["layers"]) for run in chosen.values() if run["status"] == "done"]
    if not depths:
        return {}
    return {label: [map_cell(run, lambda r, i=i: r["centre_query"][0][i]) for i in range(max(depths))]
            for label, run in chosen.items()}


def attribution_rows(runs, count, methods=ATTRIBUTION_METHODS):
    """``{"<label>, image k": [each method's map of panel image k]}`` for the first ``count`` panel images of each
    run (its status in each cell where the run is not done)."""
    return {f"{label}, image {k + 1}": [map_cell(run, lambda r, m=method, k=k: r["methods"][m]["maps"][k])
                                        for method in methods]
            for label, run in runs.items() for k in range(count)}


#: the group of the maps study's own models (no paper's table row) on the pages
OWN_RUNS = "the study's own models"


def map_groups(groups, study_runs, maps):
    """``groups`` (``{title: [labels]}``) and, after them, one group per paper table (``"<paper> <table>"``) of
    the other runs of ``study_runs`` (the study's ``{label: spec}``) whose model has a map (``maps``:
    ``analysis.study_maps``), and the study's own models (``{model: NAME}``) in one group last. A new dict;
    ``groups`` is left as it is."""
    out = {title: list(members) for title, members in groups.items()}
    named = {label for members in groups.values() for label in members}
    for label, spec in study_runs.items():
        if label not in named and maps[label]["draws"]:
            group = f"{spec['paper']} {spec['table']}" if "table" in spec else OWN_RUNS
            out.setdefault(group, []).append(label)
    if OWN_RUNS in out:  # after the papers' tables
        out[OWN_RUNS] = out.pop(OWN_RUNS)
    return out


def over_heads(run, measure):
    """Per layer, the mean over heads of a run's ``measure`` (``[[head value]]`` per layer); ``[]`` where the run
    is not done."""
    if run["status"] != "done":
        return []
    return [sum(heads) / len(heads) for heads in run[measure]]


def per_layer_groups(runs, groups, measures=MAP_MEASURES):
    """``{title: {axis: {label: per-layer mean over heads}}}``, one panel figure per group of ``groups`` with a
    run in ``runs`` (a group none of whose runs was measured in this profile is left out)."""
    out = {}
    for title, members in groups.items():
        members = [label for label in members if label in runs]
        if members:
            out[title] = {axis: {label: over_heads(runs[label], measure) for label in members}
                          for axis, measure in measures.items()}
    return out


def approximation_panels(errors):
    """``{axis: {"<approximation> (<unit>)": ([feature / landmark counts], [[error per count] per layer])}}`` of a
    run's approximation errors (``run["approximation"]``: per approximation, per count, per measure its errors per
    layer, and ``layers``), for ``band_curves``: the row total variation and the relative Frobenius error."""
    panels = {}
    for measure, axis in [("tv", "row total variation"), ("frobenius", "relative Frobenius error")]:
        panels[axis] = {}
        for name, unit in [("performer", "features"), ("nystrom", "landmarks")]:
            counts = list(errors[name])
            per_layer = [[errors[name][m]["per_layer"][measure][i] for m in counts] for i in range(errors["layers"])]
            panels[axis][f"{name} ({unit})"] = ([int(m) for m in counts], per_layer)
    return panels


def _yes(flag):
    return "yes" if flag else "no"


def randomisation_checks(runs):
    """One row per done run: the layers it re-drew, the rank correlation of its maps before and after and whether
    they changed; for shaped attention, the same of its learned part βA alone."""
    checks = {}
    for label, run in runs.items():
        if run["status"] != "done":
            continue
        check = run["randomisation"]
        checks[label] = {"layers re-drawn": f"{run['randomised_layers']} of {len(run['layers'])}",
                         "rank correlation": check["rank_correlation"], "changed": _yes(check["changed"])}
        learned = run.get("randomisation_learned")
        if learned:  # shaped attention: its learned part beta A alone
            checks[label].update({"rank correlation, βA": learned["rank_correlation"],
                                  "changed, βA": _yes(learned["changed"])})
    return pd.DataFrame.from_dict(checks, orient="index")


def attribution_agreement(runs, methods=ATTRIBUTION_METHODS):
    """One row per run: the agreement of each pair of attribution methods (upper triangle of its ``agreement``
    matrix, "<A> / <B>") and the integrated gradients' mean absolute completeness error ("IG error"); a run not
    done has its status instead."""
    agreement = {}
    for label, run in runs.items():
        if run["status"] != "done":
            agreement[label] = {"status": run["status"]}
            continue
        names, matrix = run["agreement"]["methods"], run["agreement"]["matrix"]
        row = agreement[label] = {}
        for i, a in enumerate(names):
            for j, b in enumerate(names[i + 1:], i + 1):
                row[f"{methods[a]} / {methods[b]}"] = matrix[i][j]
        row["IG error"] = statistics.fmean(abs(d) for d in run["methods"]["integrated_gradients"]["delta"])
    return pd.DataFrame.from_dict(agreement, orient="index")


def attribution_curves(runs, curve, methods=ATTRIBUTION_METHODS):
    """``{"<curve>, <method>": {label: (fractions, curve)}}`` of the done runs, for ``band_curves``; ``curve``:
    "deletion" or "insertion"."""
    done = {label: run["methods"] for label, run in runs.items() if run["status"] == "done"}
    return {f"{curve}, {name}": {label: (m[method]["fractions"], m[method][curve]) for label, m in done.items()}
            for method, name in methods.items()}


def attribution_areas(runs, curve, methods=ATTRIBUTION_METHODS):
    """One row per run, one column per method: the area under its ``curve`` (deletion / insertion), mean ± std
    over the panel images (std 0 for one image), three decimals; its status where the run is not done."""
    areas = {}
    for label, run in runs.items():
        areas[label] = {}
        for method, name in methods.items():
            if run["status"] != "done":
                areas[label][name] = run["status"]
                continue
            auc = run["methods"][method][f"{curve}_auc"]
            spread = statistics.stdev(auc) if len(auc) > 1 else 0.0
            areas[label][name] = f"{statistics.fmean(auc):.3f} ± {spread:.3f}"
    return pd.DataFrame.from_dict(areas, orient="index")
