"""Drop repeated inline <script> tags from every page.

With Sphinx 7.4, scripts that extensions add by body after the builder starts (sphinx-thebe's
``const THEBE_JS_URL = ...``, sphinx-togglebutton's selector) reach the page twice: once with filename
``None`` and once with ``''``. The second ``const`` declaration is a JavaScript error in the browser
console. This keeps the first copy of each script.
"""


def _dedupe(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        key = (script.filename or "", script.priority, tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    app.connect("html-page-context", _dedupe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
