"""What reaches a page as text: every string from a paper file, a result or a parameter is escaped before it is
put into a page's HTML (tables, captions) or Markdown, so that it is printed, never read as markup."""
import functools
import html
import math
import re

from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, LogFormatterMathtext

#: the characters Markdown (and MyST's dollar math) would read as markup, escaped with a backslash
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~$])")


def html_text(value, *, quote=True):
    """``value`` as text safe inside HTML: ``&``, ``<``, ``>`` (and with ``quote``, ``"`` and ``'``) as entities."""
    return html.escape(str(value), quote=quote)


def markdown_text(value):
    """``value`` as text safe inside Markdown: HTML escaped (``html_text``) and Markdown's markup characters
    escaped with a backslash, so ``<script>`` and ``**bold**`` are printed as they are written."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", html_text(value, quote=False))


#: what a spreadsheet reads as the start of a formula (or a field separator it acts on) in a cell of text
CSV_FORMULA = ("=", "+", "-", "@", "\t", "\r")
#: a plain number written as text ("-41.59", "+3", "1e-07"): a spreadsheet reads it as that number, never a formula
PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def csv_cell(value):
    """``value`` safe as a CSV cell a spreadsheet opens: text that starts like a formula (``CSV_FORMULA``: "=", "+",
    "-", "@", a tab or a carriage return) gets a leading apostrophe, which spreadsheets show as text and never
    evaluate; numbers, text that is a plain number ("-41.59": ``PLAIN_NUMBER``) and other text are left as they
    are, so that a number stays a number for a spreadsheet or ``pandas.read_csv``."""
    if isinstance(value, str) and value.startswith(CSV_FORMULA) and not PLAIN_NUMBER.fullmatch(value):
        return f"'{value}"
    return value


def csv_frame(frame):
    """``frame`` with every cell made safe by ``csv_cell`` (its index and column names too), for ``to_csv``."""
    safe = frame.map(csv_cell)
    safe.columns = [csv_cell(c) if isinstance(c, str) else c for c in safe.columns]
    safe.index = [csv_cell(i) if isinstance(i, str) else i for i in safe.index]
    return safe


def plain_text(make_figure):
    """Decorate a function that draws a figure (and returns it, or an axes of it) so that every string it put on the
    figure (labels from paper files, results and parameters) is printed as written: each text of the figure is set not
    to be read as mathtext (``$...$``). No global setting is touched (an ``rc_context`` around the drawing would
    stop the notebook's inline backend from showing later cells' figures)."""
    @functools.wraps(make_figure)
    def drawing(*args, **kwargs):
        made = make_figure(*args, **kwargs)
        figure = made if isinstance(made, Figure) else getattr(made, "figure", None)
        for text in figure.findobj(Text) if isinstance(figure, Figure) else ():
            text.set_parse_math(False)
        for ax in figure.axes if isinstance(figure, Figure) else ():
            _plain_log_ticks(ax)
        return made

    return drawing


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _plain_log_ticks(ax):
    """A log axis of ``ax`` whose tick labels matplotlib would write as mathtext (``$\\mathdefault{10^{6}}$``, which a
    figure of plain text prints raw) gets plain ones instead: "10⁶" at each power of the base, nothing between."""
    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() != "log":
            continue
        base = getattr(axis.get_transform(), "base", 10)
        for get, put in ((axis.get_major_formatter, axis.set_major_formatter),
                         (axis.get_minor_formatter, axis.set_minor_formatter)):
            if isinstance(get(), LogFormatterMathtext):
                put(FuncFormatter(lambda x, pos, b=base: _power_text(x, b)))


def _power_text(x, base):
    """"10⁶" for a power of ``base``, "" for any other tick (a minor one)."""
    if x <= 0:
        return ""
    exponent = math.log(x, base)
    if abs(exponent - round(exponent)) > 1e-9:
        return ""
    return f"{base:g}{str(round(exponent)).translate(_SUPERSCRIPT)}" if round(exponent) not in (0, 1) else f"{x:g}"
