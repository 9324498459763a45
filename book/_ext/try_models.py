"""The course models in the page: the "Try the models" widget, run by the reader's browser.

At the start of an HTML build this exports the models the widget runs to ONNX with the package
(``bertgpt.export``; cached in ``_build/try/onnx/`` by the hash of their weights), and stages in
``_build/try/site/`` everything the browser will load: the widget (``book/web/src``), the
single-threaded wasm build of onnxruntime-web (from ``book/web/node_modules``, which ``npm ci``
installs from the lockfile; ``scripts/setup.sh`` runs it), the ONNX files, the two tokenizer files
and a ``manifest.json``. When the build has finished, it copies them into ``_static/try/``. Nothing
is fetched from elsewhere at run time.

- ``{try-models} MODE`` (a directive; MODE is fill-mask, next-words, attention or all): the widget,
  with an example computed now by the package, shown as it is without JavaScript, and a note of
  what the widget downloads, measured from the staged files.
- ``{try-size}`MODE``` (a role): that download size in MB, for the prose.
- Any page whose HTML holds ``class="bertgpt-try"`` (the directive's, or the same ``<div>`` written
  by hand) gets the widget's script and style sheet; other pages load nothing.
"""

from __future__ import annotations

import functools
import gzip
import html
import json
import shutil
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

from bertgpt.registry import WIDGET_MODES, WIDGET_TOKENIZER

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "book" / "web"
RUNTIME = WEB / "node_modules" / "onnxruntime-web" / "dist"
RUNTIME_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
WIDGET_FILES = ("try.js", "words.js", "tokenizer.js", "try.css")
MODES = dict(WIDGET_MODES)  # what each part of the widget runs
MODES["all"] = tuple(dict.fromkeys(m for models in MODES.values() for m in models))
STATIC = "try"  # under _static/


def _staging(app) -> Path:
    return Path(app.outdir).parent / "try"


def _export(name: str, cache: Path) -> Path:
    """The ONNX file of course model ``name``, exported once per version of its weights."""
    import bertgpt
    from bertgpt.export import export_onnx

    sha = bertgpt.hub.card(name)["provenance"]["weights_sha256"][:12]
    path = cache / f"{name}-{sha}.onnx"
    if not path.exists():
        export_onnx(bertgpt.pretrained(name, device="cpu"), path, name=name)
    return path


def _stage(app) -> None:
    if app.builder.format != "html":
        return
    missing = [f for f in RUNTIME_FILES if not (RUNTIME / f).is_file()]
    if missing:
        raise ExtensionError(f"onnxruntime-web is not installed ({', '.join(missing)} missing from "
                             f"{RUNTIME}): run `bash scripts/setup.sh`, or `npm ci` in book/web")
    import bertgpt

    site = _staging(app) / "site"
    shutil.rmtree(site, ignore_errors=True)
    for folder in ("ort", "models", "tokenizers"):
        (site / folder).mkdir(parents=True)
    for f in WIDGET_FILES:
        shutil.copy2(WEB / "src" / f, site / f)
    for f in RUNTIME_FILES:
        shutil.copy2(RUNTIME / f, site / "ort" / f)
    models = {}
    for name in MODES["all"]:
        shutil.copy2(_export(name, _staging(app) / "onnx"), site / "models" / f"{name}.onnx")
        tokenizer = f"tokenizers/{WIDGET_TOKENIZER[name]}.json"
        shutil.copy2(bertgpt.hub.SHIPPED / WIDGET_TOKENIZER[name] / "tokenizer.json", site / tokenizer)
        cfg = bertgpt.pretrained(name, device="cpu").config
        models[name] = dict(file=f"models/{name}.onnx", tokenizer=tokenizer, causal=cfg.causal,
                            context=cfg.context, n_layer=cfg.n_layer, n_head=cfg.n_head)
    manifest = json.dumps(dict(models=models, modes=MODES), indent=1)
    (site / "manifest.json").write_text(manifest, encoding="utf-8")
    app.env.bertgpt_try_sizes = _sizes(site)


def _sizes(site: Path) -> dict:
    """Bytes each mode downloads (and gzip-compressed, as most static hosts serve them), by file."""
    def size(path: Path) -> tuple[int, int]:
        data = path.read_bytes()
        return len(data), len(gzip.compress(data, compresslevel=6))

    common = [site / "manifest.json", *(site / f for f in WIDGET_FILES),
              *(site / "ort" / f for f in RUNTIME_FILES)]
    sizes = {}
    for mode, models in MODES.items():
        files = common + [site / "models" / f"{m}.onnx" for m in models]
        files += sorted({site / "tokenizers" / f"{WIDGET_TOKENIZER[m]}.json" for m in models})
        measured = [size(f) for f in files]
        sizes[mode] = dict(bytes=sum(b for b, _ in measured), gzip=sum(g for _, g in measured),
                           runtime=sum(size(site / "ort" / f)[0] for f in RUNTIME_FILES),
                           models={m: (site / "models" / f"{m}.onnx").stat().st_size for m in models},
                           files=[str(f.relative_to(site)) for f in files])
    return sizes


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


#: the fill-the-blank panel's first sentence: the words after its blank decide it ("ratified by the
#: Senate"), which bert-mini reads and gpt-mini cannot; the page suggests changing them
FIRST_EXAMPLE = "The ___ has been ratified by the Senate."


@functools.cache
def _examples() -> dict:
    """What the widget shows before it has run, and what a page without JavaScript keeps: the package's
    answers to the widget's first sentences."""
    import torch

    import bertgpt
    from bertgpt.generate import Sampling, fill_mask, generate

    bert, gpt = bertgpt.pretrained("bert-mini", device="cpu"), bertgpt.pretrained("gpt-mini", device="cpu")
    text = FIRST_EXAMPLE
    before = text.split("___")[0]
    masks = fill_mask(bert.model, bert.tokenizer, text.replace("___", "[MASK]"), 5)[0]
    with torch.no_grad():
        logits = gpt.model(torch.tensor([gpt.tokenizer.encode(before)])).logits[0, -1]
    probs = logits.float().softmax(-1)
    top = probs.topk(5)

    def shown(i: int) -> str:
        token = gpt.tokenizer.id_to_token(i)
        return token[:-4] if token.endswith("</w>") else token + "…"

    prompt, temperature, top_k = "The state of the Union", 0.8, 20
    sampling = Sampling(temperature=temperature, top_k=top_k)
    sample = generate(gpt.model, gpt.tokenizer, prompt, 24, sampling, seed=0)
    cfg = bert.config
    return {
        "fill-mask": {"text": text,
                      "bert-mini": [[t, round(p, 4), bert.tokenizer.hf.token_to_id(t)] for t, p in masks],
                      "gpt-mini": [[shown(i), round(p, 4), i] for p, i in zip(top.values.tolist(),
                                                                          top.indices.tolist())]},
        "next-words": {"prompt": prompt, "sample": " " + sample, "temperature": temperature, "top_k": top_k},
        "attention": {"text": "The state of the Union is strong.",
                      "n_layer": cfg.n_layer, "n_head": cfg.n_head},
    }


#: The words the page writes around the widget, in the book's language (the widget's own are in
#: book/web/src/words.js). The models answer in English in both books: they read English only.
WORDS = {
    "en": dict(
        intro="<strong>The models run in the page with JavaScript.</strong> Without it, here is what they "
              "answer, computed when the book was built.",
        fill="Fill the blank", both="bert-mini (both sides)", before="gpt-mini (text before the blank)",
        sample="Next words, one sample of gpt-mini (temperature {temperature}, top-k {top_k})",
        maps="The attention maps are drawn by JavaScript only; chapter 2 draws the same kind of map as "
             "figures.",
        note="The models run in your browser, with onnxruntime-web: no server and no kernel. The first "
             "answer downloads {total} ({gzip} where the server compresses files): the runtime ({runtime}) "
             "and {models}. Nothing is sent anywhere.",
        **{"and": ", "}),
    "zh": dict(
        intro="<strong>模型要靠 JavaScript 在網頁中執行。</strong>"
              "沒有 JavaScript 時，這裡是建置本書時算出的答案。",
        fill="填空", both="bert-mini（讀兩側）", before="gpt-mini（只讀空格之前的文字）",
        sample="接下來的詞：gpt-mini 的一個樣本（溫度 {temperature}，top-k {top_k}）",
        maps="注意力圖只能由 JavaScript 畫出；第 2 章以圖的形式畫出同一種圖。",
        note="模型在你的瀏覽器中以 onnxruntime-web 執行：沒有伺服器，也沒有核心。第一次作答要下載 {total}"
             "（伺服器壓縮檔案時為 {gzip}）：執行環境（{runtime}）以及 {models}。不會傳送任何資料。",
        **{"and": "、"}),
}


def _static_html(mode: str, examples: dict, say: dict) -> str:
    """The example as plain HTML: what a reader without JavaScript sees."""
    e = html.escape
    parts = [f'<div class="bertgpt-static"><p>{say["intro"]}</p>']
    if mode in ("fill-mask", "all"):
        f = examples["fill-mask"]
        rows = "".join(f"<tr><td>{k + 1}</td><td><code>{e(b[0])}</code> {100 * b[1]:.1f}%</td>"
                       f"<td><code>{e(g[0])}</code> {100 * g[1]:.1f}%</td></tr>"
                       for k, (b, g) in enumerate(zip(f["bert-mini"], f["gpt-mini"])))
        parts.append(f"<p>{say['fill']}: <em>{e(f['text'])}</em></p>"
                     f'<table class="table"><thead><tr><th></th><th>{say["both"]}</th>'
                     f'<th>{say["before"]}</th></tr></thead><tbody>{rows}</tbody></table>')
    if mode in ("next-words", "all"):
        n = examples["next-words"]
        parts.append(f"<p>{say['sample'].format(**n)}: {e(n['prompt'])}<mark>{e(n['sample'])}</mark></p>")
    if mode in ("attention", "all"):
        parts.append(f"<p>{say['maps']}</p>")
    return "".join(parts) + "</div>"


def _note(sizes: dict, mode: str, say: dict) -> str:
    s = sizes[mode]
    models = say["and"].join(f"{m} ({_mb(b)})" for m, b in s["models"].items())
    text = say["note"].format(total=_mb(s["bytes"]), gzip=_mb(s["gzip"]), runtime=_mb(s["runtime"]),
                              models=models)
    return f'<p class="bertgpt-try-note">{text}</p>'


class TryModels(SphinxDirective):
    """``{try-models} MODE``: the widget (see the module's docstring)."""

    optional_arguments = 1
    option_spec = {"class": directives.class_option}

    def run(self):
        mode = self.arguments[0] if self.arguments else "all"
        if mode not in MODES:
            raise self.error(f"try-models: unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        self.env.note_dependency(str(WEB / "src" / "try.js"))
        _track(self.env, self.env.docname)
        sizes = getattr(self.env, "bertgpt_try_sizes", None)
        if sizes is None:
            raise self.error("try-models: the widget's files were not staged (an HTML build stages them)")
        examples, say = _examples(), WORDS["zh" if (self.config.language or "").startswith("zh") else "en"]
        wanted = examples if mode == "all" else {mode: examples[mode]}
        data = json.dumps(wanted).replace("</", "<\\/")
        body = (f'<div class="bertgpt-try" data-mode="{mode}">{_static_html(mode, examples, say)}'
                f'<script type="application/json" class="bertgpt-try-example">{data}</script>'
                f"{_note(sizes, mode, say)}</div>")
        return [nodes.raw("", body, format="html")]


def try_size(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{try-size}`MODE``` or ``{try-size}`MODE gzip```: what that part of the widget downloads."""
    env = inliner.document.settings.env
    mode, _, how = text.strip().partition(" ")
    sizes = getattr(env, "bertgpt_try_sizes", None)
    if sizes is None or mode not in MODES or how not in ("", "gzip", "runtime"):
        msg = inliner.reporter.error(f"try-size: unknown {text!r} (MODE, 'MODE gzip' or 'MODE runtime'), or "
                                     "files not staged", line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    _track(env, env.docname)
    return [nodes.Text(_mb(sizes[mode][how or "bytes"]))], []


def _track(env, docname: str) -> None:
    if not hasattr(env, "bertgpt_try_docs"):
        env.bertgpt_try_docs = set()
    env.bertgpt_try_docs.add(docname)


def _outdated(app, env, added, changed, removed):
    """Pages with the widget are read again on every build: the examples and sizes may have changed."""
    return sorted(getattr(env, "bertgpt_try_docs", set()) - set(removed))


def _merge(app, env, docnames, other):
    _track(env, "")  # make sure the set exists
    env.bertgpt_try_docs |= getattr(other, "bertgpt_try_docs", set())
    env.bertgpt_try_docs.discard("")


def _assets(app, pagename, templatename, context, doctree):
    if 'class="bertgpt-try"' in context.get("body", ""):
        app.add_js_file(f"{STATIC}/try.js", type="module")
        app.add_css_file(f"{STATIC}/try.css")


def _copy(app, exception):
    if exception is None and app.builder.format == "html":
        shutil.copytree(_staging(app) / "site", Path(app.outdir) / "_static" / STATIC, dirs_exist_ok=True)


def setup(app):
    app.add_directive("try-models", TryModels)
    app.add_role("try-size", try_size)
    app.connect("builder-inited", _stage)
    app.connect("env-get-outdated", _outdated)
    app.connect("env-merge-info", _merge)
    app.connect("html-page-context", _assets)
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
