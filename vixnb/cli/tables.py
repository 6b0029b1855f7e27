"""Plain-text tables of the command line: ``vixnb measure`` records (and scaling-sweep rows and crossovers),
``vixnb bench mixers``, ``vixnb bench train`` and ``vixnb bench fill`` rows. The pages' tables are DataFrames
(``vixnb.report``)."""
from ..measure import FAVOR_GFLOPS_COLUMN, FUSED_SOFTMAX, MATERIALISED_SOFTMAX, PATHS, summary_row
from ..plan.entries import TrainEntry
from ..plan.plan import shown_settings


def text_cell(value, spec, *, blank="-"):
    """A cell of a plain-text table: ``blank`` for None, text as it is, a number formatted by ``spec``."""
    if value is None:
        return blank
    if isinstance(value, str):
        return value
    return format(value, spec)


def measure_table(records):
    """A plain-text table of ``measure`` records, ``scaling_sweep`` rows or ``crossovers`` rows."""
    if not records:
        return "(no records)"
    first = records[0]
    if "metric" in first and "reference" in first:
        return _crossovers_table(records)
    if "tokens" in first and "mechanism" in first:
        return _sweep_table(records)
    rows = [summary_row(r) for r in records]
    paths = [p for p in PATHS if any(f"train GB ({p})" in r for r in rows)]
    head = f"{'model':<18}{'paper params':>13}{'true params':>12}{'Size MB':>9}{'GMACs':>8}{'GFLOPs':>8}{'favor GF':>9}"
    for p in paths:
        head += f"{'train GB ' + p:>19}{'step ms':>9}{'img/s':>9}"
    lines = [head]
    for r in rows:
        if "GFLOPs" not in r:
            lines.append(f"{r['model']:<18}  {r.get('status')}")
            continue
        line = (f"{r['model']:<18}{r['params (paper)']:>13,}{r['params (true)']:>12,}{r['Size MB']:>9.2f}"
                f"{r['GMACs']:>8.3f}{r['GFLOPs']:>8.3f}{r[FAVOR_GFLOPS_COLUMN]:>9.3f}")
        for p in paths:
            line += (f"{text_cell(r[f'train GB ({p})'], '.2f'):>19}{text_cell(r[f'train step ms ({p})'], '.1f'):>9}"
                     f"{text_cell(r[f'img/s ({p})'], '.1f'):>9}")
        lines.append(line)
    prov = records[0].get("provenance", {})
    lines.append(f"batch {rows[0].get('batch')}; device {prov.get('device')}; torch {prov.get('torch')}; "
                 f"commit {prov.get('commit')}; train GB = peak reserved; favor GF = GFLOPs in the favor paper's "
                 "convention; img/s on a CPU is a fixed-batch CPU timing")
    return "\n".join(lines)


def _crossovers_table(rows):
    lines = [f"{'mechanism':<24}{'reference':<24}{'metric':<13}{'cheaper from':>13}{'crossover':>11}  status"]
    for r in rows:
        lines.append(f"{r['mechanism']:<24}{r['reference']:<24}{r['metric']:<13}{text_cell(r['cheaper_from'], 'd'):>13}"
                     f"{text_cell(r['crossover_tokens'], '.0f'):>11}  {r['status']}")
    return "\n".join(lines)


def _sweep_table(rows):
    first = rows[0]
    lines = [f"scaling sweep: batch {first['batch']}, dim {first['dim']}, "
             f"{first['heads']} heads x {first['dim_head']}, "
             f"{first['mode']}, {first['device']} {first['dtype']} ({first['provenance']['device']})",
             f"{'mechanism':<24}{'tokens':>7}{'ms':>10}{'peak MB':>10}{'est GB':>9}{'GFLOPs':>10}  status"]
    for r in rows:
        lines.append(f"{r['mechanism']:<24}{r['tokens']:>7}{text_cell(r['ms'], '.2f'):>10}"
                     f"{text_cell(r['peak_mb'], '.1f'):>10}"
                     f"{text_cell(r['estimate_gb'], '.3f'):>9}{text_cell(r['gflops'], '.2f'):>10}  {r['status']}")
    return "\n".join(lines)


def mixers_table(rows):
    """A plain-text table of ``bench_mixers`` rows."""
    head = rows[0] if rows else {}
    lines = [f"token mixers, forward + backward: {head.get('batch')} x {head.get('tokens')} tokens, "
             f"dim {head.get('dim')}, "
             f"{head.get('heads')} heads x {head.get('dim_head')}, {head.get('device')} {head.get('dtype')}"
             f"{_compiled_label(head.get('compiled'))}; "
             f"ratios vs {MATERIALISED_SOFTMAX} (x ref) and {FUSED_SOFTMAX} (x fused)",
             f"{'mechanism':<24}{'ms':>10}{'x ref':>8}{'x fused':>9}{'peak MiB':>11}{'x ref':>8}"
             f"{'aten ops':>10}  params"]
    for r in rows:
        lines.append(f"{r['mechanism']:<24}{text_cell(r['ms'], '.2f'):>10}"
                     f"{text_cell(r['ratio_vs_materialized_softmax'], '.2f'):>8}"
                     f"{text_cell(r.get('ratio_vs_fused_softmax'), '.2f'):>9}{text_cell(r['peak_mb'], '.1f'):>11}"
                     f"{text_cell(r['memory_ratio_vs_materialized_softmax'], '.2f'):>8}{_ops_cell(r):>10}"
                     f"  {text_cell(r['params'], ',')}"
                     + (f"  ERROR {r['error']}" if r.get("error") else ""))
    if rows:
        lines.append(f"memory: {next((r['memory'] for r in rows if r.get('memory')), 'n/a')}")
        lines.append("aten ops: operators one forward + backward dispatches, views excluded / all (batch 1)")
    return "\n".join(lines)


def _compiled_label(compiled):
    if not compiled:
        return ""
    return ", torch.compile" + ("" if compiled in (True, "default") else f" (mode {compiled})")


def _ops_cell(row):
    return f"{row['aten_ops_compute']}/{row['aten_ops']}" if row.get("aten_ops") else "-"


def train_table(rows):
    """A plain-text table of ``bench_train`` rows, with the projected time of the paper protocol."""
    head = (f"{'model':<18}{'batch':>6}{'reference img/s':>17}{'ours img/s':>12}{'ratio':>8}"
            f"{'paper protocol (min, projected)':>33}{'at':>6}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['model']:<18}{r['batch_size']:>6}"
                     f"{text_cell(r.get('reference_images_per_s'), '.1f', blank='—'):>17}"
                     f"{text_cell(r.get('ours_images_per_s'), '.1f', blank='—'):>12}"
                     f"{text_cell(r.get('ratio'), '.2f', blank='—'):>8}"
                     f"{text_cell(r.get('projected_paper_minutes'), '.1f', blank='—'):>33}{r['projected_dtype']:>6}")
    total = [r["projected_paper_minutes"] for r in rows if r.get("projected_paper_minutes")]
    if rows:
        r0 = rows[0]
        lines.append(f"device {r0['device']}, dtype {r0['dtype']}, torch {r0['torch']}; "
                     f"projected Table 1 total at the paper protocol: {sum(total):.1f} min over {len(total)} models")
        lines.append(f"projection: epochs x ({r0['paper_train_images']:,} training + "
                     f"{r0['paper_test_images']:,} / 3 test "
                     f"images) at our path's speed in the paper profile's precision ({r0['projected_dtype']}"
                     + (f", timed separately from the {r0['dtype']} column" if "ours_paper_dtype_images_per_s" in r0
                        else "") + ")")
    return "\n".join(lines)


def plan_table(entries):
    """A plain-text table of plan entries (``vixnb.plan.plan.Entry``): priority, what, status, GPU minutes, basis."""
    width = max([len("chapter"), *(len(e.chapter) for e in entries)]) + 2
    whats = [entry_words(e) for e in entries]
    what_width = max([len("what"), *map(len, whats)]) + 2
    head = f"{'#':>4} {'lvl':>3}  {'chapter':<{width}}{'what':<{what_width}}{'status':<9}{'GPU min':>8}  basis / reason"
    lines = [head]
    for e, what in zip(entries, whats):
        lines.append(f"{e.priority:>4} {e.level:>3}  {e.chapter:<{width}}{what:<{what_width}}{e.status:<9}"
                     f"{text_cell(e.est_gpu_minutes, '.1f'):>8}  {e.reason or e.basis}")
    blocked = sorted({e.dataset for e in entries if e.blocked})
    if blocked:
        lines.append(f"\nNo copy here of {', '.join(blocked)} (VIXNB_DATA): those runs need the data first; "
                     "`vixnb train MODEL --dataset NAME --download` fetches it where online.")
    return "\n".join(lines)


def entry_words(entry):
    """A plan entry in words: "model on dataset, seed N, key=value ..." for a run, "measure NAME" for a record."""
    if not isinstance(entry, TrainEntry):
        return f"{entry.job} {entry.name}"
    settings = "".join(f", {k}={v}" for k, v in shown_settings(entry.settings).items())
    return f"{entry.model} on {entry.dataset}, seed {entry.seed}{settings}"


def plan_totals(totals, profile, gpu=None, gpus=1):
    """Per chapter and for the book: entries, stored, left, GPU-hours left and in all on one ``gpu`` (default: the
    H100 the figures were measured on), and the wall-clock hours of what is left on ``gpus`` of them."""
    name = (gpu or "h100").upper()
    on = f"on {gpus} GPU{'s' if gpus != 1 else ''} h"
    lines = [f"{'GPU-hours (' + profile + ', ' + name + ')':<28}{'entries':>8}{'stored':>8}{'left':>6}{'left h':>9}"
             f"{'all h':>8}{on:>13}"]
    for chapter, t in totals.items():
        lines.append(f"{chapter:<28}{t['entries']:>8}{t['stored']:>8}{t['to_run']:>6}"
                     f"{t['to_run_gpu_hours']:>9.2f}{t['all_gpu_hours']:>8.2f}{t['hours_on_gpus']:>13.2f}")
    lines.append(f"GPU-hours on one {name} (--gpu names another); {on.removesuffix(' h')}: the hours until the last "
                 f"entry left ends, each GPU taking the next in priority order (--gpus N; a Slurm array of N at once)")
    return "\n".join(lines)


def fill_table(rows):
    """A plain-text table of ``bench_fill`` rows: one line per model and approach, then each model's winner."""
    if not rows:
        return "(no rows)"
    k = rows[0]["seeds"]
    labels = {"one_seed": "one seed", "ensemble": f"ensemble of {k} seeds", "compiled": "torch.compile",
              "cuda_graphs": "compile, CUDA graphs"}
    head = f"{'model':<18}{'approach':<24}{'img/s':>10}{'x one seed':>12}{f'time, {k} seeds vs {k} runs':>27}  status"
    lines = [head, "-" * len(head)]
    for r in rows:
        for approach, label in labels.items():
            if f"{approach}_images_per_s" not in r:
                continue
            lines.append(f"{r['model']:<18}{label:<24}{text_cell(r[f'{approach}_images_per_s'], '.1f'):>10}"
                         f"{text_cell(r[f'{approach}_vs_one_seed'], '.2f'):>12}"
                         f"{text_cell(r[f'{approach}_time_vs_separate'], '.2f'):>27}"
                         f"  {r.get(f'{approach}_status', '')}")
    r0 = rows[0]
    lines.append(f"device {r0['device']}, dtype {r0['dtype']}, batch {r0['batch_size']} per seed, torch {r0['torch']}; "
                 f"time = training {k} seeds this way / {k} separate one-seed runs one after another")
    for r in rows:
        exact = "exactly" if r["can_ensemble"] else f"not exactly ({r['can_ensemble_reason'].split(': ')[0]})"
        lines.append(f"{r['model']}: winner {r['winner'] or '-'} (fastest single-seed approach: "
                     f"{labels.get(r['best_separate'], '-')}); its paper configuration ensembles {exact}")
    return "\n".join(lines)
