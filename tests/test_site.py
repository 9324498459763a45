"""The built book, checked in a real browser.

Builds the site with the strict command, serves it on 127.0.0.1 and opens every page of the table of
contents in headless Chromium: no console errors, formulas typeset by MathJax, every image loaded,
and on chapter pages a Colab launch link to the chapter's Colab edition (colab/<name>.ipynb, written by
scripts/colab_edition.py; book/_ext/colab_launch.py points the button there). A screenshot of each page
is saved to _build/screenshots/<name>.png. Every page is opened a second time in dark mode (screenshots in
_build/screenshots/dark/), and the search page must find a word that only a chapter uses.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.site


def toc_files() -> list[str]:
    """Every file named in _toc.yml, in reading order, without extension."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [chapter["file"] for chapter in part.get("chapters", [])]
    return files


def source(name: str) -> Path | None:
    """The source file behind a TOC entry, or None if it does not exist (yet)."""
    for suffix in (".md", ".ipynb"):
        if (ROOT / (name + suffix)).exists():
            return ROOT / (name + suffix)
    return None


PAGES = [name for name in toc_files() if source(name)]


def _build_book() -> tuple[int, str]:
    jupyter_book = shutil.which("jupyter-book") or str(Path(sys.executable).parent / "jupyter-book")
    build = subprocess.run(
        [jupyter_book, "build", ".", "--warningiserror", "--keep-going", "--all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return build.returncode, build.stdout + build.stderr


@pytest.fixture(scope="session")
def site(tmp_path_factory, worker_id) -> Path:
    """Build the book from scratch with warnings as errors; fail on any warning.

    Under pytest-xdist each worker asks for the site. Two builds into one _build/ at once break each
    other, so the first worker builds under a lock and the others read its exit status and log.
    """
    if worker_id == "master":
        status, log = _build_book()
    else:
        shared = tmp_path_factory.getbasetemp().parent  # this run's folder, common to its workers
        result = shared / "site-build.log"
        with FileLock(shared / "site-build.lock"):
            if not result.exists():
                status, log = _build_book()
                result.write_text(f"{status}\n{log}", encoding="utf-8")
        first, log = result.read_text(encoding="utf-8").split("\n", 1)
        status = int(first)
    assert status == 0, log[-5000:]
    assert "WARNING" not in log, log[-5000:]
    return HTML


MISSING: list[str] = []  # paths the server answered with 404


@pytest.fixture(scope="session")
def server(site: Path):
    """Serve the built site on 127.0.0.1, on a free port, recording requests for missing files."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def send_error(self, code, *args, **kwargs):
            if code == 404 and self.path != "/favicon.ico":  # the browser asks for it on its own
                MISSING.append(self.path)
            super().send_error(code, *args, **kwargs)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=site))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        reason = f"{CHROMIUM} is missing: run scripts/setup.sh as root to install Chromium"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


VISIBLE_TEXT = """() => {
    const body = document.body.cloneNode(true);
    body.querySelectorAll('pre, code, script, style, mjx-container, .MathJax').forEach(e => e.remove());
    return body.textContent;
}"""

LOAD_IMAGES = """async () => {
    const images = [...document.images];
    images.forEach(img => { img.loading = 'eager'; });
    await Promise.all(images.map(img => img.complete ? null
        : new Promise(resolve => { img.onload = img.onerror = resolve; })));
    return images.filter(img => img.naturalWidth === 0).map(img => img.src);
}"""


@pytest.mark.parametrize("name", PAGES)
def test_page(name: str, server: str, browser):
    errors = []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    MISSING.clear()

    def on_console(msg):
        # A missing file shows up as "Failed to load resource"; the server's MISSING names it.
        if msg.type == "error" and not msg.text.startswith("Failed to load resource"):
            errors.append(msg.text)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{server}/{name}.html", wait_until="load")

    html = page.content()
    if 'class="math' in html:
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("() => MathJax.startup.promise")
        assert page.locator("mjx-container").count() > 0, "math on the page was not typeset"
        text = page.evaluate(VISIBLE_TEXT)
        assert "$$" not in text and "\\(" not in text, "raw TeX left in the visible text"

    assert page.evaluate(LOAD_IMAGES) == [], "images that did not load"
    assert "CC BY 4.0" in page.locator("footer.bd-footer-content").inner_text(), "no licence in the footer"

    if source(name).suffix == ".ipynb":
        links = page.locator('a[href*="colab.research.google.com"]')
        assert links.count() > 0, "no Colab launch button"
        href = links.first.get_attribute("href")
        assert href.endswith(f"/colab/{Path(name).name}.ipynb"), href  # the edition, not the MyST source

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{Path(name).name}.png"), full_page=True)
    page.close()
    assert errors == [], errors
    assert MISSING == [], f"files not found: {MISSING}"


CONTRAST = """() => {
    // Relative luminance (WCAG) of the article's text colour and of the page background.
    const lum = css => {
        const [r, g, b] = css.match(/[\\d.]+/g).slice(0, 3).map(Number).map(v => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const text = document.querySelector('article p') || document.querySelector('article');
    const fg = lum(getComputedStyle(text).color);
    const bg = lum(getComputedStyle(document.body).backgroundColor);
    return (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
}"""


@pytest.mark.parametrize("name", PAGES)
def test_page_in_dark_mode(name: str, server: str, browser):
    """The page in a reader's dark mode: the theme follows it, text stays readable, no errors."""
    errors = []
    page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme="dark")
    page.on("console", lambda msg: msg.type == "error" and not msg.text.startswith(
        "Failed to load resource") and errors.append(msg.text))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{server}/{name}.html", wait_until="load")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    contrast = page.evaluate(CONTRAST)
    assert contrast >= 4.5, f"text contrast {contrast:.1f}:1 in dark mode"  # WCAG AA
    page.evaluate(LOAD_IMAGES)
    (SCREENSHOTS / "dark").mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "dark" / f"{Path(name).name}.png"), full_page=True)
    page.close()
    assert errors == [], errors


COUNT_RESULTS = """() => ({figures: document.querySelectorAll('article img').length,
    glued: document.querySelectorAll('article .pasted-text, article .pasted-inline').length})"""


def test_the_language_switch_leads_to_the_same_page_in_chinese_and_back(server: str, browser, site: Path):
    """The zh-TW book is built beside the English one; a chapter there shows the English run's figures
    and glued numbers, and each page links to its counterpart."""
    assert (site / "zh-TW" / "book" / "preface.html").is_file()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    chapter = "chapters/02_one_skeleton.html"
    page.goto(f"{server}/{chapter}", wait_until="load")
    english = page.evaluate(COUNT_RESULTS)
    assert english["figures"] > 0 and english["glued"] > 0, english
    link = page.locator("p.language-switch a")
    assert link.inner_text() == "中文（臺灣）"
    link.click()
    page.wait_for_load_state("load")
    assert page.url == f"{server}/zh-TW/{chapter}"
    assert page.evaluate("document.documentElement.lang").startswith("zh")
    assert page.evaluate(COUNT_RESULTS) == english  # the same run: nothing re-executed, nothing lost
    page.locator("p.language-switch a").click()
    page.wait_for_load_state("load")
    assert page.url == f"{server}/{chapter}"
    page.goto(f"{server}/zh-TW/book/preface.html", wait_until="load")
    assert "預訓練" in page.locator("article").inner_text()  # a translated page reads in Chinese
    page.close()


# A word that only chapter 2 uses, and the page the search must list for it.
SEARCH_WORD, SEARCH_PAGE = "skeleton", "chapters/02_one_skeleton.html"


def test_search_finds_a_chapter(server: str, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{server}/search.html?q={SEARCH_WORD}", wait_until="load")
    page.wait_for_selector("#search-results ul.search li a", timeout=20_000)
    hrefs = page.eval_on_selector_all("#search-results ul.search li a", "els => els.map(e => e.href)")
    page.close()
    assert any(SEARCH_PAGE in href for href in hrefs), hrefs


# --- "Try the models" (book/try.md, book/_ext/try_models.py): the course models in the page ------

TRY_PAGE = "book/try.html"
# Three sentences a reader might type, one with the blank first (gpt-mini then reads only [SEP]).
TRY_SENTENCES = ["We must protect the ___ of our children.", "Congress should pass this ___ without delay.",
                 "[MASK] people of this nation deserve better."]
LOCAL = ("127.0.0.1", "localhost")

def _try_models():
    """book/_ext/try_models.py, the extension that draws the page, loaded as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("try_models", ROOT / "book" / "_ext" / "try_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIRST_EXAMPLE = _try_models().FIRST_EXAMPLE  # the sentence the page opens on


def python_top5(text: str) -> dict[str, list[int]]:
    """The package's top 5 token ids at the blank: bert-mini's fill_mask, gpt-mini's next token after the
    text before the blank (an empty text: [SEP], as generate() starts). Each list is checked to be
    free of near ties, so that fp32 rounding (onnxruntime against PyTorch) cannot reorder it."""
    import torch

    import bertgpt
    from bertgpt.generate import encode_masked
    from bertgpt.inputs import bert_whole

    masked = text.replace("___", "[MASK]")
    bert, gpt = bertgpt.pretrained("bert-mini"), bertgpt.pretrained("gpt-mini")
    ids = bert_whole(bert.tokenizer, encode_masked(bert.tokenizer, masked), bert.config.context)
    before = gpt.tokenizer.encode(masked.split("[MASK]")[0]) or [gpt.tokenizer.sep_id]
    with torch.no_grad():
        rows = {"bert-mini": bert.model(torch.tensor([ids])).logits[0, ids.index(bert.tokenizer.mask_id)],
                "gpt-mini": gpt.model(torch.tensor([before])).logits[0, -1]}
    top = {}
    for name, logits in rows.items():
        values, indices = logits.topk(6)
        gaps = values[:-1] - values[1:]
        assert gaps.min() > 1e-3, f"{name} nearly ties on {text!r}: pick another sentence"
        top[name] = indices[:5].tolist()
    return top


def _shown(page, name: str, text: str) -> list[int]:
    page.wait_for_function("([name, text]) => document.querySelector(`ol[data-model='${name}']`)"
                           "?.dataset.text === text", arg=[name, text], timeout=120_000)
    ids = page.eval_on_selector_all(f"ol[data-model='{name}'] li", "els => els.map(e => e.dataset.id)")
    return [int(i) for i in ids]


def _offline_page(browser, url: str):
    """A browser page on ``url`` whose requests outside localhost are refused and recorded; returns the
    page, then the console's errors, the refused URLs and every URL asked, as lists filled as it runs."""
    from urllib.parse import urlparse

    errors, outside, asked = [], [], []
    page = browser.new_page(viewport={"width": 1280, "height": 900})

    def only_local(route):
        asked.append(route.request.url)
        if urlparse(route.request.url).hostname in LOCAL:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    page.on("console", lambda msg: msg.type == "error" and not msg.text.startswith(
        "Failed to load resource") and errors.append(msg.text))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    MISSING.clear()
    page.goto(url, wait_until="load")
    page.wait_for_selector(".bertgpt-try[data-ready='true']")
    return page, errors, outside, asked


def test_try_page_runs_both_models_with_the_network_blocked(server: str, browser, site: Path):
    """Three typed sentences: the page's top 5 are the package's, and no request leaves localhost."""
    from urllib.parse import urlparse

    page, errors, outside, asked = _offline_page(browser, f"{server}/{TRY_PAGE}")
    box = "[data-panel='fill-mask'] input"
    # the page's first example, then the same sentence with only the words after its blank changed:
    # bert-mini's list moves, gpt-mini's (which reads the words before the blank) does not
    first, changed = FIRST_EXAMPLE, FIRST_EXAMPLE.replace("ratified by the Senate", "passed by the House")
    assert page.input_value(box) == first
    shown = {}
    for text in (first, changed):
        page.fill(box, text)
        shown[text] = {name: _shown(page, name, text) for name in ("bert-mini", "gpt-mini")}
    assert shown[first]["bert-mini"] != shown[changed]["bert-mini"]
    assert shown[first]["gpt-mini"] == shown[changed]["gpt-mini"]
    for text in TRY_SENTENCES:
        page.fill(box, text)
        expected = python_top5(text)
        for name in ("bert-mini", "gpt-mini"):
            assert _shown(page, name, text) == expected[name], (name, text)

    page.click("[data-tab='next-words']")
    page.click("[data-panel='next-words'] button")
    page.wait_for_selector("[data-panel='next-words'] .bertgpt-continuation[data-text]", timeout=120_000)
    assert page.inner_text("[data-panel='next-words'] mark").strip(), "gpt-mini wrote nothing"
    page.click("[data-tab='attention']")
    page.fill("[data-panel='attention'] input", TRY_SENTENCES[0])
    for name in ("bert-mini-ltr", "bert-mini-mlm"):
        page.wait_for_selector(f"canvas[data-model='{name}'][data-text]", timeout=120_000)
    page.click("[data-tab='fill-mask']")
    page.screenshot(path=str(SCREENSHOTS / "try-live.png"), full_page=True)

    built = site / "_static" / "try"
    total = sum(f.stat().st_size for f in built.rglob("*") if f.is_file())
    stated = page.inner_text(".bertgpt-try-note")
    assert f"downloads {total / 1e6:.1f} MB" in stated, f"{stated!r}: not the {total:,} bytes built"
    page.close()
    assert outside == [], f"requests left localhost: {outside}"
    assert all(urlparse(u).hostname in LOCAL for u in asked)
    assert any(u.endswith(".wasm") for u in asked) and any(u.endswith("gpt-mini.onnx") for u in asked)
    assert errors == [], errors
    assert MISSING == [], f"files not found: {MISSING}"


def test_the_chinese_try_page_speaks_chinese_and_its_models_answer_offline(server: str, browser, site: Path):
    """The zh-TW book's Try page: the widget's words are Chinese (book/web/src/words.js), its note states
    the zh-TW site's own download in Chinese, and the models give the package's top 5, offline."""
    page, errors, outside, _ = _offline_page(browser, f"{server}/zh-TW/{TRY_PAGE}")
    assert page.inner_text("[data-tab='fill-mask']") == "填空"
    assert "讀空格的兩側" in page.inner_text("[data-panel='fill-mask'] h4")
    text = TRY_SENTENCES[0]
    page.fill("[data-panel='fill-mask'] input", text)
    expected = python_top5(text)
    for name in ("bert-mini", "gpt-mini"):
        assert _shown(page, name, text) == expected[name], name
    assert "毫秒" in page.inner_text("[data-panel='fill-mask'] .bertgpt-status")
    built = site / "zh-TW" / "_static" / "try"
    total = sum(f.stat().st_size for f in built.rglob("*") if f.is_file())
    stated = page.inner_text(".bertgpt-try-note")
    assert f"下載 {total / 1e6:.1f} MB" in stated, f"{stated!r}: not the {total:,} bytes built"
    page.screenshot(path=str(SCREENSHOTS / "try-live-zh-TW.png"), full_page=True)
    page.close()
    assert outside == [] and errors == [] and MISSING == [], (outside, errors, MISSING)


def test_try_page_without_javascript_shows_the_packages_example(server: str, browser):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{server}/{TRY_PAGE}", wait_until="load")
    static = page.locator(".bertgpt-try .bertgpt-static")
    assert static.is_visible()
    text = static.inner_text()
    example = FIRST_EXAMPLE
    assert example in text
    import bertgpt
    from bertgpt.generate import fill_mask

    bert = bertgpt.pretrained("bert-mini")
    first, p = fill_mask(bert.model, bert.tokenizer, example.replace("___", "[MASK]"), 1)[0][0]
    assert f"{first} {100 * p:.1f}%" in text
    page.screenshot(path=str(SCREENSHOTS / "try-no-javascript.png"), full_page=True)
    context.close()
