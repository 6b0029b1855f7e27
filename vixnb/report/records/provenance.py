"""Provenance on the page: the banner that says what kind of numbers a page shows, and provenance lines."""
from __future__ import annotations

import pandas as pd

from ...plan.entries import BenchEntry, TrainEntry
from ...escape import markdown_text
from ...plan.plan import STATUSES, build, counts, shown_settings, todo
from ...runs.profiles import get_profile, gpu_profile, list_profiles
from ...results import ResultsStore, StoreError, made_on, read_json
from ...runs.policy import cannot_make_here, code_changed
from ...models import list_models, model_cfg
from ...models.registry import changed_defaults
from ...runs.spec import run_model_settings


def short_device(device):
    """A device's short name for a table cell (``NVIDIA H100 80GB HBM3`` → ``H100``)."""
    return str(device).replace("NVIDIA ", "").split(" ")[0]


def banner(profile, *, compute="missing", counted=None):
    """A markdown banner that says what kind of numbers the page shows; with ``compute="never"``, also that
    the page was rendered from the results store, and whether the store holds any result of ``profile``. With
    ``counted`` (``page_counts`` of a chapter, where the page reads its GPU runs from the store), also how many of
    the chapter's runs and measurements are stored, missing and stale, the ``vixnb batch`` line that makes the rest
    and the plan's estimate of their GPU time (``missing_line``)."""
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
    if counted is not None:
        text += "\n>\n> " + missing_line(counted)
    return text


def page_counts(profile, chapter, *, compute="missing", store=None):
    """``plan.counts`` of ``chapter``'s own plan entries in ``profile`` (as the plan page counts them: ``--chapter``
    also makes the runs whose weights its measurements read, which other chapters count), with ``profile``,
    ``chapter`` and ``unestimated`` (entries left without a GPU-time estimate) added: the one count that the
    chapter's banner and footer print (``missing_line``, ``counts_sentence``). None where the page makes its runs as
    it runs: a CPU profile, or a GPU profile on a machine that can make it unless ``compute="never"``."""
    if not (gpu_profile(profile) and (compute == "never" or cannot_make_here(profile))):
        return None
    entries = [e for e in build(profile, store=store, chapter=[chapter]) if e.chapter == chapter]
    unestimated = sum(e.est_gpu_minutes != e.est_gpu_minutes for e in todo(entries))
    return {**counts(entries), "profile": profile, "chapter": chapter, "unestimated": unestimated}


def counts_sentence(counted):
    """The words every banner and footer print for ``page_counts``: "Of the N entries this page reads in
    `budget`: S stored, M missing, …" (each of the plan's ``STATUSES`` that has entries); or, where the page
    made its runs as it ran (``counted`` None), that it did."""
    if counted is None:
        return "This page made the runs it reads as it ran: the tables above show each one's status."
    return f"Of the {counted['entries']} entries this page reads in `{counted['profile']}`: {status_counts(counted)}."


def status_counts(counted):
    """"5 stored, 5 weights wanted, 66 missing": of ``counted`` (``plan.counts``), the stored entries and each other
    status of the plan that has some, in the words every page prints."""
    return ", ".join([f"{counted['stored']} stored", *(f"{counted[s]} {s}" for s in STATUSES[1:] if counted[s])])


def missing_line(counted):
    """One Markdown line for a banner: ``counts_sentence`` of ``counted`` (``page_counts``), the ``vixnb batch``
    line that makes the entries left and the plan's estimate of their GPU time, or that nothing is left."""
    profile, chapter = counted["profile"], counted["chapter"]
    if not counted["to_run"]:
        return f"**{counts_sentence(counted)}** Nothing is left for `vixnb batch` to make."
    unknown = counted["unestimated"]
    return (f"**{counts_sentence(counted)}** `vixnb batch --profile {profile} --chapter {chapter}` makes the "
            f"{counted['to_run']} left on a GPU: about {counted['gpu_hours_left']:.1f} GPU-hours by the plan's "
            "estimate" + (f", {unknown} not estimated yet" if unknown else "")
            + f" (`vixnb plan --profile {profile}`).")


def provenance_line(records, *, profile=None):
    """One line naming the profile, devices, commits, torch versions and dates (UTC day a run finished or a
    measurement was made) behind ``records``: training results (``runs.make.run``; their seeds and data too),
    measurement records, or saved benchmarks. ``profile`` names the profile where the records do not;
    records without provenance that are "not yet run" are counted."""
    made = [r for r in records if isinstance(r, dict) and r.get("provenance")]
    if not made:
        reasons = sorted({r["reason"] for r in records if isinstance(r, dict) and r.get("reason")})
        if reasons:
            return f"No run of this configuration has been made yet ({'; '.join(map(markdown_text, reasons))})."
        return "No measurement was made for this section."
    provs = [r["provenance"] for r in made]
    fields = {k: sorted({str(p[k]) for p in provs if k in p}) for k in ("profile", "device", "commit", "torch", "seed")}
    if profile is not None:
        fields["profile"] = [str(profile)]
    fields["data"] = sorted({str(r["provenance"].get("data", r["config"]["dataset"])) for r in made
                             if "data" in r["provenance"] or "config" in r})
    fields["date"] = sorted({d for p in provs if (d := made_on(p))})
    fields.update(readings(made))
    missing = sum(1 for r in records if isinstance(r, dict) and r.get("status") == "not yet run")
    line = "; ".join(f"{k}: {', '.join(map(markdown_text, v))}" for k, v in fields.items() if v)  # results' text
    notes = sorted({p["note"] for p in provs if p.get("note")})
    return (f"Provenance — {line}" + (f"; {missing} run(s) not yet run" if missing else "") + "."
            + "".join(f" Note: {markdown_text(n.rstrip('.'))}." for n in notes))


def readings(records):
    """``{setting: ["value (models)", ...]}``: for each setting whose default changed (``register_model(
    changed_defaults=...)``: the Performer's ``key_max``, the small ViTs' ``layout`` and ``block``), the value each of
    the training results ``records`` was made with (a stored config without the setting means the earlier default),
    and the models it made: which reading made each number of a page."""
    found = {}
    for r in records:
        config = r.get("config") if isinstance(r, dict) else None
        model = (config or {}).get("model")
        if model not in list_models() or not changed_defaults(model):
            continue
        settings = run_model_settings(config)
        for setting in changed_defaults(model):
            found.setdefault(setting, {}).setdefault(str(settings[setting]), set()).add(model_cfg(model)["label"])
    return {setting: [f"{value} ({', '.join(sorted(labels))})" for value, labels in sorted(values.items())]
            for setting, values in sorted(found.items())}


def measured_runs_frame(runs):
    """One row per run of a measurement of trained weights (the ``runs`` of ``analysis.attention_record`` or
    ``analysis.records.study_record``, in the order given): the model, the status, and for a measured run the
    training run its weights come from (profile, random seed, device, commit, day) and the first 12 hex digits of
    their SHA-256; else why it was not measured."""
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


# ----- the provenance page: every stored result, what is missing, and the book's totals -----------------------

def gpu_profiles():
    """The profiles whose runs need a GPU (``budget``, ``paper``): the ones the store keeps for the book."""
    return [p for p in list_profiles() if gpu_profile(p)]


def book_plans(profiles=None, *, store=None):
    """``{profile: plan entries}`` (``vixnb.plan.plan.build``) of the GPU profiles: build them once and pass them to
    ``book_totals``, ``stored_results_frame`` and ``missing_runs_frame``."""
    return {p: build(p, store=store) for p in (profiles or gpu_profiles())}


def code_flags(plans, store):
    """``{result path: why}`` for the stored training runs of ``plans`` whose model or engine code changed since
    (``runs.policy.code_changed``); the plan itself does not count them stale."""
    flags = {}
    for entries in plans.values():
        for e in entries:
            if isinstance(e, TrainEntry) and e.status == "stored" and e.path not in flags:
                why = code_changed(store.get(e.config) or {})
                if why:
                    flags[e.path] = why
    return flags


def book_totals(plans=None, *, store=None):
    """What the store holds for the book, from the plans of the GPU profiles (``plan.counts``, the one count every
    page prints): ``stored``, ``missing``, ``stale`` (the plan's status: a result that no longer answers, which
    ``vixnb batch`` makes again), ``entries``, ``to_run`` and ``gpu_hours_left``, in all and ``per_profile``. A
    stored run whose code was edited since (``code_flags``) stays stored here, as in the plan."""
    store = store if store is not None else ResultsStore()
    plans = plans if plans is not None else book_plans(store=store)
    per = {profile: counts(entries) for profile, entries in plans.items()}
    keys = ("entries", *STATUSES, "to_run", "gpu_hours_left")
    out = {k: sum(t[k] for t in per.values()) for k in keys}
    return {**out, "per_profile": per}


def totals_frame(totals):
    """One row per GPU profile of ``book_totals``: its entries, each of the plan's ``STATUSES`` and the GPU-hours
    left; the statuses of a row add up to its entries (a benchmark both profiles read counts in each)."""
    return pd.DataFrame.from_dict({p: {"entries": t["entries"], **{s: t[s] for s in STATUSES},
                                       "GPU-h left": t["gpu_hours_left"]} for p, t in totals["per_profile"].items()},
                                  orient="index")


def _wall(seconds):
    if not seconds:
        return ""
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def stored_results_frame(plans=None, *, store=None, for_page=False):
    """One row per stored result of the GPU profiles, training runs, measurement records and the benchmark
    records they share (profile "bench") alike: the
    notebook(s) whose plan entries it answers, model (a record's name), dataset, profile, protocol, random seed,
    device, torch, vixnb commit (10 digits), UTC day, wall time, status: the plan's ("stored", or "stale: <why>"),
    or "not in the plan" for a file no chapter reads any more, and a note where the model or engine code changed
    since (``runs.policy.code_changed``; the plan does not count that stale); ``settings``, a run's settings beyond its
    profile's (a paper row's), as key=value. Sorted by profile, notebook, model, settings and seed. ``for_page``: the
    same in four columns that fit a page, numbered: the run (model, settings), the notebook and where (dataset, profile,
    protocol, seed), where and when it was made (device, torch, commit, day, wall time), and the status without its
    reason."""
    store = store if store is not None else ResultsStore()
    plans = plans if plans is not None else book_plans(store=store)
    flags = code_flags(plans, store)
    rows = []
    shared = {e.path: e for entries in plans.values() for e in entries if isinstance(e, BenchEntry)}
    for profile, entries in [*plans.items(), ("bench", list(shared.values()))]:
        by_path = {}
        for e in entries:
            by_path.setdefault(e.path, []).append(e)
        files = (sorted((store.root / profile).glob("*.json"))
                 + sorted((store.root / profile / "measure").glob("*.json"))
                 if profile != "bench" else sorted((store.root / "bench").glob("*.json")))
        for path in files:
            rel = path.relative_to(store.root).as_posix()
            found = by_path.get(rel, [])
            try:
                record = read_json(path)
            except StoreError as e:  # listed, not fatal: the page says which file and why
                record = {"status": f"unreadable: {e}"}
            prov = record.get("provenance") or {}
            config = record.get("config") or {}
            status = (record["status"] if record.get("status", "").startswith("unreadable") else
                      found[0].status if found else "not in the plan")
            why = found[0].reason if found and found[0].status == "stale" else ""
            settings = found[0].settings if found else {}
            rows.append({"notebook": ", ".join(dict.fromkeys(e.chapter for e in found)),
                         "model": config.get("model") or path.stem,
                         "settings": " ".join(f"{k}={v}" for k, v in shown_settings(settings).items()),
                         "dataset": config.get("dataset") or (found[0].dataset if found else "") or "",
                         "profile": profile,
                         "protocol": config.get("protocol", ""),
                         "seed": config.get("seed", ""), "device": prov.get("device", ""),
                         "torch": prov.get("torch", ""), "commit": str(prov.get("commit", ""))[:10],
                         "date": made_on(prov) or "", "wall time": _wall(record.get("seconds")),
                         "status": f"stale: {why}" if why else status,
                         "note": (f"code edited since: {flags[rel]}" if rel in flags else
                                  found[0].reason if found and found[0].status in ("unverified", "weights wanted",
                                                                                    "damaged") else "")})
    frame = pd.DataFrame(rows, columns=["notebook", "model", "settings", "dataset", "profile", "protocol", "seed",
                                        "device", "torch", "commit", "date", "wall time", "status", "note"])
    order = frame["seed"].map(lambda s: s if isinstance(s, int) else -1)
    frame = frame.assign(_seed=order).sort_values(["profile", "notebook", "model", "settings", "_seed"]).drop(
        columns="_seed").reset_index(drop=True)
    if not for_page:
        return frame

    def joined(row, names, labels=None):
        return ", ".join(f"{(labels or {}).get(n, '')}{row[n]}" for n in names if row[n] not in ("", None))

    page = pd.DataFrame({
        "run": frame.apply(joined, axis=1, names=["model", "settings"]),
        "notebook: where": frame["notebook"].map(lambda n: f"{n}: " if n else "") + frame.apply(
            joined, axis=1, names=["dataset", "profile", "protocol", "seed"], labels={"seed": "seed "}),
        "made": frame.apply(joined, axis=1, names=["device", "torch", "commit", "date", "wall time"],
                            labels={"torch": "torch "}),
        "status": frame["status"].str.split(":").str[0]})
    page.index = range(1, len(page) + 1)  # one row per file: a model's configurations and seeds are several
    return page


def missing_runs_frame(plans=None, *, store=None):
    """For each notebook and GPU profile with entries still to run (missing or stale): how many ("to run"), of
    which stale, the plan's estimated GPU-hours ("GPU-h"; "no estimate": the entries it could not estimate, no
    benchmark of their model yet), and the ``vixnb batch`` line that runs them (``--chapter``: the
    chapter's entries and the runs whose weights they read). Nothing here depends on the machine that builds
    the page (not which data sets it holds), so every machine gives the same page."""
    plans = plans if plans is not None else book_plans(store=store)
    rows = []
    for profile, entries in plans.items():
        left = todo(entries)
        for chapter in dict.fromkeys(e.chapter for e in left):
            mine = [e for e in left if e.chapter == chapter]
            rows.append({"notebook": chapter, "profile": profile, "to run": len(mine),
                         "stale": sum(e.status == "stale" for e in mine),
                         "GPU-h": round(sum(e.est_gpu_minutes for e in mine
                                            if e.est_gpu_minutes == e.est_gpu_minutes) / 60, 2),
                         "no estimate": sum(e.est_gpu_minutes != e.est_gpu_minutes for e in mine),
                         "command": f"vixnb batch --profile {profile} --chapter {chapter}"})
    return pd.DataFrame(rows, columns=["notebook", "profile", "to run", "stale", "GPU-h", "no estimate", "command"])


def stale_note(record, again):
    """The sentence a page adds after a measurement ``record`` measured from other weights than those stored now
    (its ``stale`` entry), ``again`` being the command that measures it again; "" where the record is current."""
    if not record.get("stale"):
        return ""
    return f" **Measured from other weights than those stored now** ({record['stale']}): {again} measures again."
