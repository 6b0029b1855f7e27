"""Provenance on the page: the banner that says what kind of numbers a page shows, and provenance lines."""
from __future__ import annotations

from ..results import made_on


def banner(profile, *, compute="missing"):
    """A markdown banner that says what kind of numbers the page shows; with ``compute="never"``, also that
    the page was rendered from the results store, and whether the store holds any result of ``profile``."""
    from ..profiles import get_profile
    from ..results import ResultsStore

    prof = get_profile(profile)
    if profile == "smoke":
        text = ("> **Smoke profile: pipeline check on synthetic data — not the paper's numbers.** "
                f"{prof['description']} Accuracies below measure nothing about the models.")
    else:
        text = f"> **Profile `{profile}`.** {prof['description']}"
    if compute == "never":
        text += (f"\n>\n> Rendered from the results store (`results/{profile}/`): nothing was trained or measured "
                 "when this page was built; each number's provenance (device, commit, seed, date) is shown with it.")
        if not ResultsStore().holds_profile(profile):
            text += (f" **The store holds no `{profile}` result yet:** these runs have not been made, and the page "
                     "shows them as \"not yet run\".")
    return text


def provenance_line(records, *, profile=None):
    """One line naming the profile, devices, commits, torch versions and dates (UTC day a run finished or a
    measurement was made) behind ``records``: training results (``train.run``; their seeds and data too),
    measurement records, or saved benchmarks. ``profile`` names the profile where the records do not;
    records without provenance that are "not yet run" are counted."""
    made = [r for r in records if isinstance(r, dict) and r.get("provenance")]
    if not made:
        reasons = sorted({r["reason"] for r in records if isinstance(r, dict) and r.get("reason")})
        if reasons:
            return f"No run of this configuration has been made yet ({'; '.join(reasons)})."
        return "No measurement was made for this section."
    provs = [r["provenance"] for r in made]
    fields = {k: sorted({str(p[k]) for p in provs if k in p}) for k in ("profile", "device", "commit", "torch", "seed")}
    if profile is not None:
        fields["profile"] = [str(profile)]
    fields["data"] = sorted({str(r["provenance"].get("data", r["config"]["dataset"])) for r in made
                             if "data" in r["provenance"] or "config" in r})
    fields["date"] = sorted({d for p in provs if (d := made_on(p))})
    missing = sum(1 for r in records if isinstance(r, dict) and r.get("status") == "not yet run")
    line = "; ".join(f"{k}: {', '.join(v)}" for k, v in fields.items() if v)
    notes = sorted({p["note"] for p in provs if p.get("note")})
    return (f"Provenance — {line}" + (f"; {missing} run(s) not yet run" if missing else "") + "."
            + "".join(f" Note: {n.rstrip('.')}." for n in notes))


def measured_runs_frame(runs):
    """One row per run of a measurement of trained weights (the ``runs`` of ``analysis.attention_record`` or
    ``analysis.records.study_record``, in the order given): the model, the status, and for a measured run the
    training run its weights come from (profile, random seed, device, commit, day) and the first 12 hex digits of
    their SHA-256; else why it was not measured."""
    import pandas as pd

    rows = {}
    for label, run in runs.items():
        t = run.get("training") or {}
        trained = (f"{t.get('profile')}, seed {t.get('seed')}, {t.get('device')}, {(t.get('commit') or '')[:10]}, "
                   f"{(t.get('finished') or '')[:10]}") if t else ""
        why = run.get("reason") or ""  # a run without a map: the status says it
        rows[label] = {"model": run.get("model", ""), "status": run["status"],
                       "trained (profile, seed, device, commit, day)": trained or why,
                       "weights SHA-256": (run.get("weights_sha256") or "")[:12]}
    return pd.DataFrame.from_dict(rows, orient="index")
