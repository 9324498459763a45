"""On every page, a link to the same page in the other language: the English book at the site's root,
the Traditional Chinese (Taiwan) one under ``zh-TW/``. When the English book has built, this builds
the Chinese one into its ``zh-TW/`` folder (``scripts/translations.py``: the English chapters with
the stored translations, ``language: zh_TW``), so one ``jupyter-book build .`` makes both."""

import importlib.util
from pathlib import Path

EDITION = "zh-TW"
ROOT = Path(__file__).resolve().parents[2]


def _switch(app, pagename, templatename, context, doctree):
    if doctree is None or "body" not in context:  # the search page and the index have no counterpart
        return
    chinese = app.config.language == "zh_TW"
    up = "../" * (pagename.count("/") + chinese)
    href = f"{up}{'' if chinese else EDITION + '/'}{pagename}.html"
    label, lang = ("English", "en") if chinese else ("中文（臺灣）", "zh-Hant-TW")
    context["body"] = (f'<p class="language-switch"><a href="{href}" hreflang="{lang}" lang="{lang}">'
                       f"{label}</a></p>\n" + context["body"])


def _build_chinese(app, exception):
    if exception is not None or app.builder.format != "html" or app.config.language == "zh_TW":
        return
    spec = importlib.util.spec_from_file_location("translations", ROOT / "scripts" / "translations.py")
    translations = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(translations)
    translations.build(Path(app.outdir) / EDITION)


def setup(app):
    app.connect("html-page-context", _switch)
    app.connect("build-finished", _build_chinese)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
