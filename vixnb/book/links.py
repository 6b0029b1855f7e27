"""The book's Sphinx extension (``_config.yml``: ``sphinx.extra_extensions``): every page made from a notebook gets
launch links to Colab and Kaggle that open the committed ``notebooks/<stem>.ipynb`` at the release tag
(``launch_links``), not the executed copy the page was rendered from, which is not committed. The links are only
written into the pages; nothing is fetched."""
from __future__ import annotations

from pathlib import Path

from .. import RELEASE_TAG, REPOSITORY_URL
from ..paths import checkout_root
from .execute import EXECUTED_DIR, NOTEBOOK_DIR

__all__ = ["source_notebook", "launch_links"]

KAGGLE_URL = "https://kaggle.com/kernels/welcome?src="


def source_notebook(pagename: str, root: Path | None = None) -> str | None:
    """The committed notebook a book page is made from (``book/executed[/<profile>]/<stem>`` ->
    ``notebooks/<stem>.ipynb``), or None for a page that is not an executed chapter: outside ``book/executed``, or
    made there from no notebook (the errata page, written from a Markdown template). ``root``: the checkout
    (default ``paths.checkout_root``, else the current folder, where Sphinx builds)."""
    prefix = EXECUTED_DIR.as_posix() + "/"
    if not pagename.startswith(prefix):
        return None
    notebook = NOTEBOOK_DIR / f"{pagename.rpartition('/')[2]}.ipynb"
    return notebook.as_posix() if (Path(root or checkout_root() or Path.cwd()) / notebook).is_file() else None


def launch_links(pagename: str, *, repository: str | None = None, tag: str | None = None,
                 colab_url: str = "https://colab.research.google.com") -> dict[str, str] | None:
    """``{"Colab": url, "Kaggle": url}`` opening the page's ``source_notebook`` in ``repository`` (default
    ``vixnb.REPOSITORY_URL``) at ``tag`` (default ``vixnb.RELEASE_TAG``); None for a page not made from a
    notebook."""
    notebook = source_notebook(pagename)
    if notebook is None:
        return None
    repository = (repository or REPOSITORY_URL).rstrip("/")
    owner_repo = repository.split("github.com/", 1)[-1]
    blob = f"{repository}/blob/{tag or RELEASE_TAG}/{notebook}"
    return {"Colab": f"{colab_url.rstrip('/')}/github/{owner_repo}/blob/{tag or RELEASE_TAG}/{notebook}",
            "Kaggle": KAGGLE_URL + blob}


def _launch_buttons(app, pagename, templatename, context, doctree):
    """Replace the theme's launch buttons (which would open the uncommitted executed copy) by ``launch_links``,
    from ``_config.yml``'s repository, branch and Colab URL."""
    options = app.config.html_theme_options or {}
    links = launch_links(pagename, repository=options.get("repository_url"), tag=options.get("repository_branch"),
                         colab_url=(options.get("launch_buttons") or {}).get("colab_url") or
                         "https://colab.research.google.com")
    buttons = context.get("header_buttons")
    if links is None or buttons is None:
        return
    icons = {"Colab": "_static/images/logo_colab.png", "Kaggle": "fab fa-kaggle"}
    group = {"type": "group", "tooltip": "Open this notebook", "icon": "fas fa-rocket", "label": "launch-buttons",
             "buttons": [{"type": "link", "text": name, "tooltip": f"Open the notebook on {name}",
                          "icon": icons[name], "url": url} for name, url in links.items()]}
    kept = [b for b in buttons if b.get("label") != "launch-buttons"]
    buttons[:] = kept[:1] + [group] + kept[1:] if kept else [group]


def setup(app):
    """Sphinx extension: ``_launch_buttons`` after the theme's own (priority 501)."""
    app.connect("html-page-context", _launch_buttons, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
