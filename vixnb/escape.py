"""What reaches a page as text: every string from a paper file, a result or a parameter is escaped before it is
put into a page's HTML (tables, captions) or Markdown, so that it is printed, never read as markup."""
import functools
import html
import re

import matplotlib as mpl

#: the characters Markdown (and MyST's dollar math) would read as markup, escaped with a backslash
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~$])")


def html_text(value, *, quote=True):
    """``value`` as text safe inside HTML: ``&``, ``<``, ``>`` (and with ``quote``, ``"`` and ``'``) as entities."""
    return html.escape(str(value), quote=quote)


def markdown_text(value):
    """``value`` as text safe inside Markdown: HTML escaped (``html_text``) and Markdown's markup characters
    escaped with a backslash, so ``<script>`` and ``**bold**`` are printed as they are written."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", html_text(value, quote=False))


def plain_text(make_figure):
    """Decorate a function that draws a figure so that every string it puts on the figure (labels from paper files,
    results and parameters) is printed as written: matplotlib's mathtext (``$...$``) is off while it runs (each text
    keeps the setting it was made with), and the caller's settings are as they were afterwards."""
    @functools.wraps(make_figure)
    def drawing(*args, **kwargs):
        with mpl.rc_context({"text.parse_math": False}):
            return make_figure(*args, **kwargs)

    return drawing
