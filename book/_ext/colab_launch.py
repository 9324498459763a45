"""Point each chapter's Colab launch button at the chapter's Colab edition, ``colab/<name>.ipynb``.

sphinx-book-theme builds the Colab link from the repository, the branch and the page's own path, so a
chapter's button would open ``chapters/<name>.ipynb``: the MyST source, which Colab shows with its roles
raw and without the values the book glues in. ``scripts/colab_edition.py`` writes the same chapter as
plain Jupyter into ``colab/``. This runs after the theme has made its launch buttons (priority 501) and
swaps the page's path for the edition's in the Colab link, on the pages that have an edition. The zh-TW
book's buttons open the zh-TW edition, ``colab/zh-TW/<name>.ipynb``.
"""

from pathlib import Path

EDITION = "colab"


def _colab_edition(app, pagename, templatename, context, doctree):
    name = Path(pagename).name
    edition = f"{EDITION}/zh-TW" if (app.config.language or "").startswith("zh") else EDITION
    if not pagename.startswith("chapters/") or not (Path(app.srcdir) / edition / f"{name}.ipynb").exists():
        return
    source = f"{pagename}.ipynb"
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []):
            url = button.get("url", "")
            if button.get("text") == "Colab" and url.endswith(source):
                button["url"] = url[: -len(source)] + f"{edition}/{name}.ipynb"


def setup(app):
    app.connect("html-page-context", _colab_edition, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
