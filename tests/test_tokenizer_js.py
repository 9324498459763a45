"""The JavaScript tokenizer of the book's widget (book/web/src/tokenizer.js) gives Python's ids.

It reads the shipped tokenizer.json files, gpt-mini's BPE and bert-mini's WordPiece, and must cut
text exactly as ``checkpoint.tokenizer.encode`` does: on 200 held-out sentences of the test
addresses, on a blank written as [MASK], and on every character of the blocks such text is written
in. (Over all of Unicode the two differ only on a few hundred characters that recent Unicode versions
added or recategorised: node's tables are newer than those of Hugging Face's Rust code.)
The test runs the JavaScript with node.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import bertgpt
from bertgpt.inputs import split_sentences

ROOT = Path(__file__).resolve().parent.parent
ENCODE = ROOT / "book" / "web" / "encode.mjs"
MODELS = ROOT / "code" / "bertgpt" / "models"
SENTENCES = 200


def node() -> str:
    found = shutil.which("node")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("node is missing: scripts/setup.sh installs it")
        pytest.skip("node is missing: scripts/setup.sh installs it")
    return found


def run_js(name: str, texts: list, decode: bool = False) -> list:
    args = [node(), str(ENCODE), str(MODELS / name / "tokenizer.json")] + (["--decode"] if decode else [])
    done = subprocess.run(args, input=json.dumps(texts), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def held_out() -> list[str]:
    """200 sentences spread over the test addresses, never seen in pretraining."""
    sentences = [s for d in bertgpt.load_corpus().test for p in d.paragraphs for s in split_sentences(p)]
    assert len(sentences) >= SENTENCES
    return sentences[:: len(sentences) // SENTENCES][:SENTENCES]


BLOCKS = [*range(0x0000, 0x0250), *range(0x2000, 0x2070), *range(0x20A0, 0x20C0), *range(0xFB00, 0xFB07)]
EDGES = ["", "   ", "the state of the [MASK] is strong", "[MASK][MASK] [CLS]x[SEP]", "naïve café ﬁne ＡＢＣ",
         "tab\there\u00a0nbsp \u200bzero-width \u0085", "1,234.5 — $5 don't “quoted” ‘too’", "ΣΑΣ İstanbul ß",
         "中文 and 日本語", "a" * 120]


@pytest.mark.parametrize("name", ["gpt-mini", "bert-mini"])
def test_javascript_gives_pythons_ids(name, held_out):
    tokenizer = bertgpt.Tokenizer.load(MODELS / name / "tokenizer.json")
    characters = [f"a{chr(c)}b {chr(c)}" for c in BLOCKS]
    texts = held_out + EDGES + characters
    got = run_js(name, texts)
    wrong = [(t, tokenizer.encode(t), ids) for t, ids in zip(texts, got) if tokenizer.encode(t) != ids]
    assert wrong == [], f"{len(wrong)} texts cut otherwise, first: {wrong[:3]}"
    rows = [tokenizer.encode(t) for t in held_out[:50]]
    assert run_js(name, rows, decode=True) == [tokenizer.decode(ids) for ids in rows]


def test_every_course_model_reads_one_of_the_two_tokenizers():
    """The widget loads two tokenizer files: each course model ships one of them, byte for byte."""
    files = {p.parent.name: p.read_bytes() for p in MODELS.glob("*/tokenizer.json")}
    assert {"gpt-mini", "bert-mini", "bert-mini-ltr", "bert-mini-mlm"} <= set(files)
    assert files["bert-mini-ltr"] == files["bert-mini"] == files["bert-mini-mlm"] != files["gpt-mini"]
