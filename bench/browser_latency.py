"""How long does each course model take to answer a typed sentence in the reader's browser?

Serves the built book (``_build/html``: build it first, ``jupyter-book build .``) on 127.0.0.1 and
opens the "Try the models" page in headless Chromium (Debian's ``/usr/bin/chromium``, as the site
test), every request outside localhost blocked. For each model the widget runs (gpt-mini, bert-mini,
bert-mini-ltr, bert-mini-mlm) it times, in the page, an answer to a sentence as the widget reads it:
tokenizing, the ONNX forward pass in onnxruntime-web's single-threaded wasm, and ranking the top 5.
The first answer also downloads and compiles the model (cold); the others are the median of
``--sentences`` held-out sentences of the test addresses (warm), ``model ms`` is the forward pass
alone, and ``full context`` is one answer to those sentences joined, cut to the context of 128
tokens. The target is an answer within 1 second on 2 CPU cores. Then it times the fill-mask widget
as a reader uses it: from typing a sentence to both top-5 lists shown (less the widget's 250 ms wait
for the reader to stop typing).

    python bench/browser_latency.py [--site _build/html] [--sentences 20]
"""

import argparse
import functools
import http.server
import json
import statistics
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import bertgpt
from bertgpt.inputs import split_sentences

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("gpt-mini", "bert-mini", "bert-mini-ltr", "bert-mini-mlm")
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
DEBOUNCE_MS = 250  # try.js waits this long after the last keystroke before it runs the models


def sentences(n: int) -> list[str]:
    """``n`` held-out sentences of 8 to 40 words, spread over the test addresses."""
    found = [s for d in bertgpt.load_corpus().test for p in d.paragraphs for s in split_sentences(p)
             if 8 <= len(s.split()) <= 40]
    return found[:: max(1, len(found) // n)][:n]


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=site))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def measure(page, texts: list[str]) -> dict:
    results = {}
    for name in MODELS:
        cold = page.evaluate("([n, t]) => window.bertgptTry.answer(n, t)", [name, texts[0]])
        warm = [page.evaluate("([n, t]) => window.bertgptTry.answer(n, t)", [name, t]) for t in texts]
        full = page.evaluate("([n, t]) => window.bertgptTry.answer(n, t)", [name, " ".join(texts)])
        results[name] = dict(cold_ms=round(cold["ms"]),
                             warm_ms=round(statistics.median(w["ms"] for w in warm), 1),
                             warm_max_ms=round(max(w["ms"] for w in warm), 1),
                             model_ms=round(statistics.median(w["model"] for w in warm), 1),
                             tokens=round(statistics.median(w["tokens"] for w in warm)),
                             full_context_ms=round(full["ms"], 1), full_context_tokens=full["tokens"])
    return results


def typed(page, texts: list[str]) -> float:
    """Median ms from typing a sentence with a blank to both top-5 lists shown, less the debounce."""
    times = []
    for text in texts:
        words = text.split()
        words[len(words) // 2] = "___"
        blanked = " ".join(words)
        start = time.perf_counter()
        page.fill("[data-panel='fill-mask'] input", blanked)
        page.wait_for_function("t => [...document.querySelectorAll('ol.bertgpt-top5')].every("
                               "o => o.dataset.text === t)", arg=blanked, timeout=60_000)
        times.append(1000 * (time.perf_counter() - start) - DEBOUNCE_MS)
    return round(statistics.median(times), 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--sentences", type=int, default=20)
    args = parser.parse_args()
    if not (args.site / "_static" / "try" / "manifest.json").is_file():
        raise SystemExit(f"no built widget under {args.site}: run `jupyter-book build .` first")
    from playwright.sync_api import sync_playwright

    texts = sentences(args.sentences)
    httpd, url = serve(args.site)
    outside = []

    def only_local(route):
        if urlparse(route.request.url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page()
        page.route("**/*", only_local)
        page.goto(f"{url}/book/try.html", wait_until="load")
        page.wait_for_selector(".bertgpt-try[data-ready='true']")
        models = measure(page, texts)
        fill_mask = typed(page, texts[: min(10, len(texts))])
        version = browser.version
        browser.close()
    httpd.shutdown()
    print(json.dumps(dict(models=models, typed_fill_mask_ms=fill_mask, sentences=len(texts), chromium=version,
                          requests_outside_localhost=len(outside)), indent=1))


if __name__ == "__main__":
    main()
