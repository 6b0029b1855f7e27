"""The book's one palette: a model's colour from its mechanism, and a run's from its identity, the same on every page
(``palette``: the colours of one figure's names, every two at least ``MIN_DELTA_E`` apart in CIELAB, so that a reader
tells them apart)."""
from __future__ import annotations

import functools
import re
import zlib

import matplotlib.pyplot as plt

from ... import papers
from ...models import model_cfg
from ...results.store import config_key
from ...runs.asked import book_rows

#: the colour of a model's mechanism, from its name (first match): tab20's dark shade; a variant of the model
#: (``LIGHT``: hybrid embedding, warm start, our earlier reading) takes the light shade of the same hue
_HUES = [(r"ReLU", 8), (r"EXP", 9), (r"Performer|ViP|PiP|LeViP|CCP|CvP|CPV", 1),
         (r"Linformer|ViL|PiL|LeViL|CCL|CvL|CLTV|CLVT", 2), (r"Nystr|ViN|PiN|LeViN|CCN|CvN|CNV", 3), (r"FNet", 4),
         (r"ConvMixer|ResNet|WaveMix", 7), (r"Mixer", 5), (r"[Ss]implified|SAS", 6),
         (r"ViT|[Vv]anilla|PiT|LeViT|CCT|CvT|[Ss]oftmax|Transformer", 0)]
LIGHT = re.compile(r"Hybrid|hybrid|checkpoint|one LayerNorm|one-norm|sequential|earlier")


def model_color(name: str) -> tuple:
    """The colour of model ``name`` (a page's label: "Hybrid ViP", "ViP-ReLU (scratch)") in every figure of the
    book: its mechanism's hue (``_HUES``), light for a variant; a name of no known mechanism gets one of the ten
    dark colours from its text (the words in brackets where it has them: "0.5/0.5 (uniform)" and "uniform" are one
    setting), the same on every page."""
    tab20 = plt.get_cmap("tab20").colors
    hue = next((h for pattern, h in _HUES if re.search(pattern, name)), None)
    if hue is None:
        key = (re.findall(r"\(([^)]*)\)", name) or [name])[-1]
        return tab20[2 * (zlib.crc32(key.encode()) % 10)]
    return tab20[2 * hue + (1 if LIGHT.search(name) else 0)]


#: the sequential colour map of each hue of ``_HUES`` (tab20's pairs), from which a mechanism's third and later runs
#: take their shades
_HUE_MAPS = ("Blues", "Oranges", "Greens", "Reds", "Purples", "copper", "RdPu", "Greys", "YlGn", "GnBu")


def run_identity(records):
    """A run's identity in every figure: the store key of its configuration with the seed left out (its seeds are
    one line), from the first of ``records`` that has a configuration; None where none has."""
    config = next((r["config"] for r in records or [] if isinstance(r, dict) and isinstance(r.get("config"), dict)),
                  None)
    return config_key({**config, "seed": 0}) if config else None


@functools.cache
def _run_ranks(profile):
    """``{run identity: (hue, light, rank)}``: every run the paper files' chapters train in ``profile`` (their tables'
    rows, then their questions' runs), in the files' order, each with its mechanism's hue (``_HUES``, from the row's
    label and model), whether it is a variant (``LIGHT``) and its rank among the runs of that hue and shade: the
    rank decides its colour (``run_color``), the same on every page."""
    ranks, counts = {}, {}
    for key, _, table, row, (spec, *_) in book_rows(profile):
        entry = papers.table(key, table)["rows"][row]
        label = (entry.get("label") if isinstance(entry, dict) else None) or row
        text = f"{model_cfg(spec.model).get('label', spec.model)} {label} {' '.join(map(str, spec.settings.values()))}"
        try:
            identity = spec.key
        except ValueError:  # a setting the profile refuses: drawn by its label's colour
            continue
        if identity in ranks:
            continue
        hue = next((h for pattern, h in _HUES if re.search(pattern, text)), None)
        if hue is None:
            continue
        light = bool(LIGHT.search(text))
        counts[(hue, light)] = counts.get((hue, light), -1) + 1
        ranks[identity] = (hue, light, counts[(hue, light)])
    return ranks


def run_color(records, label):
    """The colour of the run ``records`` (one configuration's seeds) drawn as ``label``: by its identity
    (``run_identity``) where the paper files train it (``_run_ranks``): its hue's dark colour (light for a variant)
    for the first run of that hue and shade, a shade of the hue's colour map (``_HUE_MAPS``) for each later one; else
    by its label (``model_color``). One run, one colour, whatever a page calls it."""
    identity = run_identity(records)
    profile = next((r["config"].get("profile") for r in records or [] if isinstance(r, dict) and
                    isinstance(r.get("config"), dict)), None)
    found = _run_ranks(profile).get(identity) if identity and profile else None
    if found is None:
        return model_color(str(label))
    hue, light, rank = found
    if rank == 0:
        return plt.get_cmap("tab20").colors[2 * hue + int(light)]
    spread = (rank * 0.618034) % 1.0  # neighbouring ranks far apart on the map
    low, high = (0.25, 0.5) if light else (0.5, 0.95)
    return tuple(plt.get_cmap(_HUE_MAPS[hue])(low + (high - low) * spread)[:3])


#: the least CIELAB distance (CIE76 ΔE) between two colours of one figure (two runs a reader must tell apart; thin
#: lines need more than the 20 that tells two filled patches apart)
MIN_DELTA_E = 25.0
#: what a figure draws beside its runs: the chance line (grey) and a reference run (black)
CHANCE_GREY, BLACK = (0.5, 0.5, 0.5), (0.0, 0.0, 0.0)


def lab(color):
    """An sRGB colour (0-1, alpha ignored) in CIE L*a*b* (D65 white)."""
    def linear(c):
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(float(c)) for c in color[:3])
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t):
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def delta_e(first, second):
    """The CIE76 colour difference of two sRGB colours: the Euclidean distance of their ``lab`` coordinates."""
    return sum((u - v) ** 2 for u, v in zip(lab(first), lab(second))) ** 0.5


def _hue(records, name):
    """The hue (``_HUES``) of a run (its identity's, ``_run_ranks``) or of a name (its text's), or None."""
    identity = run_identity(records) if records else None
    profile = next((r["config"].get("profile") for r in records or [] if isinstance(r, dict) and
                    isinstance(r.get("config"), dict)), None)
    found = _run_ranks(profile).get(identity) if identity and profile else None
    return found[0] if found else next((h for pattern, h in _HUES if re.search(pattern, str(name))), None)


def _candidates(color, hue):
    """The colours a name may take where its own is too close to another of the figure's: shades of its hue's map
    (``_HUE_MAPS``) first, then tab20, tab20b and tab20c, each list nearest to ``color`` first."""
    shades = [tuple(plt.get_cmap(_HUE_MAPS[hue])(0.2 + 0.8 * k / 16)[:3]) for k in range(17)] if hue is not None else []
    others = [tuple(c[:3]) for name in ("tab20", "tab20b", "tab20c") for c in plt.get_cmap(name).colors]
    return sorted(shades, key=lambda c: delta_e(c, color)) + sorted(others, key=lambda c: delta_e(c, color))


def palette(names, runs=None, *, avoid=()) -> dict:
    """``{name: colour}`` for the names one figure draws: ``run_color`` of the name's records where ``runs``
    (``{name: [records]}``) has them, else ``model_color``; a name whose colour lies within ``MIN_DELTA_E`` of a colour
    an earlier name of the figure took (or of ``avoid``: the figure's other lines, ``CHANCE_GREY``, ``BLACK``) takes the
    nearest of its hue's shades, else of tab20/tab20b/tab20c, that lies at least that far from all of them."""
    out, taken = {}, [tuple(c[:3]) for c in avoid]
    for name in dict.fromkeys(names):
        records = (runs or {}).get(name)
        color = tuple(run_color(records, name) if records else model_color(str(name)))[:3]
        if taken and min(delta_e(color, t) for t in taken) < MIN_DELTA_E:
            choices = _candidates(color, _hue(records, name))
            color = next((c for c in choices if min(delta_e(c, t) for t in taken) >= MIN_DELTA_E),
                         max(choices, key=lambda c: min(delta_e(c, t) for t in taken)))
        out[name] = color
        taken.append(color)
    return out
