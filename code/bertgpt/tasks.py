"""Downstream tasks with real labels, built from the corpus, and the same from a CSV file.

Five tasks come from the State of the Union addresses; each is a stand-in for a kind of task the
2018 papers fine-tuned on::

    party          which party's president wrote a paragraph (Democratic / Republican)   ~ SST-2
    era            when a paragraph was written (before 1861 / 1861–1945 / after 1945)  ~ topic
    next           does paragraph B follow paragraph A in the same address?             ~ NSP, MRPC
    acceptability  a sentence as written, or with two neighbouring words swapped        ~ CoLA
    boundaries     which words end a sentence, in lowercased text whose sentence-ending  ~ SQuAD, NER:
                   punctuation was removed (a label per word)                              token level

``boundaries`` is the token-level task. Whether a sentence ends after a word is mostly decided by
what follows it ("... to the congress | we ..."), which a left-to-right model has not read when it
must answer: the task BERT's two-sided context should win, as it won SQuAD in the papers.

One comes from the second corpus, the King James Bible (``load_corpus("kjv")``), for measuring what
pretraining on the addresses is worth on text of another genre::

    genre          which of the Bible's six divisions a verse is from (law, history,    ~ topic, short texts
                   wisdom, prophets, gospels, letters)

A warning about ``party``: in these splits it is confounded with period. In the training split the
Democratic addresses are mostly from before 1861 or after 1945 and the Republican ones from
1861–1945 (18/24/38 and 0/43/37 addresses), while the validation split's Democratic addresses are
old and its Republican ones recent. A classifier that learns "the language of an era" therefore
scores *below* chance on held-out addresses (measured with both mini models at 300 examples:
validation accuracy 0.37–0.43 in five runs of six): the task shows what a spurious cue does, not how
well a model reads politics.

The splits follow the corpus's: training examples come from ``corpus.train`` documents, validation
examples from ``corpus.val``, and test examples only from ``corpus.test`` — addresses that
pretraining never saw. No document gives examples to two splits. Sizes are capped (2,000 / 500 /
1,000) by a seeded, deterministic choice that balances the classes::

    task = load_task("era")
    task.train[0].text, task.labels[task.train[0].label]
    task.majority_baseline()            # always the most frequent training label, on test
    small = task.subsample(300)         # 300 training examples, stratified; val and test unchanged
    mine = load_task("reviews.csv")     # columns text, label, optional text_b and split
"""

from __future__ import annotations

import bisect
import csv
import random
import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from .corpus import SPLITS, Corpus, Document, load_corpus
from .inputs import IGNORE, hash_split, split_sentences  # the sentence splitter of BERT's NSP pairs

TASKS = ("party", "era", "next", "acceptability", "genre", "boundaries")
TASK_CORPUS = dict(genre="kjv")  # the corpus a task is built from when none is given; else "sotu"
CAPS = dict(train=2000, val=500, test=1000)  # most examples per split
MIN_WORDS = 20  # shorter paragraphs (headings, salutations, one-line transitions) carry no signal


@dataclass(frozen=True)
class Example:
    text: str
    label: int
    text_b: str | None = None  # the second text of a pair task
    doc: str = ""              # id of the source document (for ``next``: paragraph A's)


@dataclass(frozen=True)
class Tagged:
    """A token-level example: words and one tag per word (``IGNORE`` where a word is not scored)."""
    words: tuple[str, ...]
    tags: tuple[int, ...]
    doc: str = ""

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def text_b(self) -> None:
        """A token-level example is one text."""
        return None

    @property
    def label(self) -> int:
        """Always 0. A token-level example has no label of its own, so balanced splits see one group."""
        return 0


@dataclass
class Task:
    name: str
    labels: tuple[str, ...]  # label i's name
    train: list[Example]
    val: list[Example]
    test: list[Example]

    @property
    def n_classes(self) -> int:
        return len(self.labels)

    @property
    def token_level(self) -> bool:
        """Whether the task labels each word (:class:`Tagged` examples), not each example."""
        return bool(self.train) and isinstance(self.train[0], Tagged)

    def split(self, name: str) -> list[Example]:
        if name not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, not {name!r}")
        return getattr(self, name)

    def majority_baseline(self, split: str = "test") -> float:
        """Accuracy on ``split`` of always predicting the most frequent training label (of each scored
        word, for a token-level task)."""
        examples = self.split(split)
        if not self.train or not examples:
            raise ValueError(f"task {self.name!r} has no training or no {split} examples")
        labels = (lambda es: [t for e in es for t in e.tags if t != IGNORE]) if self.token_level else \
            (lambda es: [e.label for e in es])
        counts = Counter(labels(self.train))
        majority = max(sorted(counts), key=counts.__getitem__)  # ties go to the smallest label
        scored = labels(examples)
        return sum(label == majority for label in scored) / len(scored)

    def subsample(self, n: int, seed: int = 0) -> Task:
        """A copy with ``n`` training examples, stratified by label and seeded; val and test unchanged."""
        if n < 1:
            raise ValueError(f"subsample needs n >= 1, not {n}")
        if n >= len(self.train):
            return replace(self, train=list(self.train))
        rng = random.Random(f"subsample-{self.name}-{seed}")
        groups = _by_label(self.train)
        share = {k: n * len(g) / len(self.train) for k, g in groups.items()}
        take = {k: int(s) for k, s in share.items()}
        for k in sorted(share, key=lambda k: take[k] - share[k])[: n - sum(take.values())]:
            take[k] += 1  # largest remainders first
        chosen = [e for k, g in groups.items() for e in rng.sample(g, take[k])]
        rng.shuffle(chosen)
        return replace(self, train=chosen)

    def trimmed(self, words: int, val: int | None = None, test: int | None = None) -> Task:
        """A copy for quicker runs: every text cut to its first ``words`` words, and the validation and
        test splits to their first ``val`` and ``test`` examples (None: all)."""
        if self.token_level:
            raise ValueError(f"task {self.name!r} labels each word: cutting its texts would cut its tags")
        if words < 1:
            raise ValueError(f"trimmed needs words >= 1, not {words}")

        def cut(examples):
            return [replace(e, text=" ".join(e.text.split()[:words]),
                            text_b=e.text_b and " ".join(e.text_b.split()[:words])) for e in examples]
        return replace(self, train=cut(self.train), val=cut(self.val[:val]), test=cut(self.test[:test]))

    def __repr__(self):
        sizes = ", ".join(f"{s}={len(self.split(s))}" for s in SPLITS)
        return f"Task({self.name!r}, labels={self.labels}, {sizes})"


def _by_label(examples: list[Example]) -> dict[int, list[Example]]:
    groups: dict[int, list[Example]] = {}
    for e in examples:
        groups.setdefault(e.label, []).append(e)
    return dict(sorted(groups.items()))


def _balanced(examples: list[Example], cap: int, rng: random.Random) -> list[Example]:
    """At most ``cap`` examples, the same number per class where the classes allow, shuffled."""
    groups = _by_label(examples)
    if not groups:
        return []
    per_class = cap // len(groups)
    chosen = [e for g in groups.values() for e in rng.sample(g, min(per_class, len(g)))]
    rng.shuffle(chosen)
    return chosen


def _paragraphs(doc: Document) -> list[str]:
    return [p for p in doc.paragraphs if len(p.split()) >= MIN_WORDS]


# --- The built-in tasks (TASKS): each a function (documents of one split, rng) -> examples -----------

PARTIES = ("Democratic", "Republican")


def _party(docs, rng):
    """Paragraphs labelled with their president's party (see the warning in the module docstring)."""
    return [Example(p, PARTIES.index(d.meta["party"]), doc=d.id)
            for d in docs if d.meta.get("party") in PARTIES for p in _paragraphs(d)]


# Three periods with thousands of paragraphs each (training split: 2,704 / 6,902 / 8,544 paragraphs of
# 20 words or more): the early republic up to the Civil War, the Civil War to the end of the Second
# World War, and the post-war era. Finer periods leave the test split (32 addresses) with a few
# addresses per class, so the test would measure those presidents rather than the period.
ERAS = ("before 1861", "1861-1945", "after 1945")


def _era_of(year: int) -> int:
    return 0 if year < 1861 else 1 if year <= 1945 else 2


def _era(docs, rng):
    return [Example(p, _era_of(d.meta["year"]), doc=d.id)
            for d in docs if "year" in d.meta for p in _paragraphs(d)]


def _next(docs, rng):
    """Consecutive paragraph pairs (A, B); half of them get B replaced by a paragraph of another address.

    Like BERT's next-sentence negatives, the replacement comes from another document of the same
    split, so no document crosses splits. A negative B is often from another decade, so topic is a
    cue as well as continuity.
    """
    pools = [(d, _paragraphs(d)) for d in docs]
    pools = [(d, ps) for d, ps in pools if ps]
    out = []
    for d, _ in pools:
        paras = d.paragraphs
        for a, b in zip(paras, paras[1:]):
            if len(a.split()) < MIN_WORDS or len(b.split()) < MIN_WORDS:
                continue
            if rng.random() < 0.5 or len(pools) < 2:
                out.append(Example(a, 1, b, doc=d.id))
            else:
                other = rng.choice([ps for o, ps in pools if o.id != d.id])
                out.append(Example(a, 0, rng.choice(other), doc=d.id))
    return out


def swap_neighbours(words: list[str], rng) -> list[str] | None:
    """The sentence with two neighbouring words exchanged, or None if no swap is safe.

    Only two plain alphabetic, different words are swapped, never the first word: moving
    punctuation or a capital would give the corruption away without any grammar.
    """
    spots = [i for i in range(1, len(words) - 1)
             if words[i].isalpha() and words[i + 1].isalpha() and words[i].lower() != words[i + 1].lower()]
    if not spots:
        return None
    i = rng.choice(spots)
    return [*words[:i], words[i + 1], words[i], *words[i + 2:]]


def _acceptability(docs, rng):
    """Each sentence (6 to 40 words) appears once: as written (1) or corrupted by one swap (0), 50/50.

    A sentence never appears in both forms, so a model cannot compare a negative with its original.
    """
    out = []
    for d in docs:
        for p in _paragraphs(d):
            for s in split_sentences(p):
                words = s.split()
                if not 6 <= len(words) <= 40:
                    continue
                swapped = swap_neighbours(words, rng) if rng.random() < 0.5 else None
                out.append(Example(" ".join(swapped), 0, doc=d.id) if swapped else Example(s, 1, doc=d.id))
    return out


# The Bible's traditional divisions by genre, as runs of its 66 books in order: they start at Genesis,
# Joshua, Job, Isaiah, Matthew and Romans (so Acts goes with the gospels, Revelation with the letters).
SECTIONS = ("law", "history", "wisdom", "prophets", "gospels", "letters")
SECTION_STARTS = (0, 5, 17, 22, 39, 44)  # book_index of each division's first book
MIN_VERSE_WORDS = 8  # verses are short (25 words on average); shorter ones are mostly genealogy and names


def _genre(docs, rng):
    """Verses of 8 words or more, labelled with their book's division."""
    return [Example(v, bisect.bisect_right(SECTION_STARTS, d.meta["book_index"]) - 1, doc=d.id)
            for d in docs if "book_index" in d.meta
            for v in d.paragraphs if len(v.split()) >= MIN_VERSE_WORDS]


BOUNDARY_WORDS = 64  # most words per passage: about 90 tokens, inside the minis' context of 128
_SENTENCE_END = re.compile(r"[.!?]+(?=[\"')\]]*$)")


def _passages(sentences: list[str]):
    """Runs of whole consecutive sentences of at most ``BOUNDARY_WORDS`` words, two or more each."""
    run: list[list[str]] = []
    for words in (s.split() for s in sentences):
        if run and sum(map(len, run)) + len(words) > BOUNDARY_WORDS:
            yield run
            run = []
        if len(words) <= BOUNDARY_WORDS:
            run.append(words)
    yield run


def _boundaries(docs, rng):
    """Passages of two or more sentences, lowercased, without the ``.``, ``!`` and ``?`` that end
    sentences: each word tagged 1 if a sentence ends after it, else 0. The passage's last word is not
    scored (that the text stops there gives it away)."""
    out = []
    for d in docs:
        for p in _paragraphs(d):
            for run in _passages(split_sentences(p)):
                if len(run) < 2:
                    continue
                words, tags = [], []
                for sentence in run:
                    cut = [w.lower() for w in sentence[:-1]] + [_SENTENCE_END.sub("", sentence[-1].lower())]
                    kept = [w for w in cut if w]
                    words += kept
                    tags += [0] * (len(kept) - 1) + [1]
                if len(words) >= MIN_WORDS:
                    out.append(Tagged(tuple(words), (*tags[:-1], IGNORE), doc=d.id))
    return out


_BUILDERS = dict(party=(_party, PARTIES), era=(_era, ERAS), next=(_next, ("not next", "next")),
                 acceptability=(_acceptability, ("corrupted", "acceptable")), genre=(_genre, SECTIONS),
                 boundaries=(_boundaries, ("inside", "ends a sentence")))


def load_task(name_or_csv: str | Path, corpus: Corpus | None = None, seed: int = 0) -> Task:
    """A built-in task by name (one of ``TASKS``) or a task read from a CSV file.

    ``corpus`` defaults to the task's own (``"kjv"`` for ``genre``, ``"sotu"`` for the others);
    ``seed`` changes which examples are drawn.
    """
    if str(name_or_csv) in TASKS:
        corpus = corpus if corpus is not None else load_corpus(TASK_CORPUS.get(str(name_or_csv), "sotu"))
        build, labels = _BUILDERS[str(name_or_csv)]
        parts = {}
        for split in SPLITS:
            rng = random.Random(f"{name_or_csv}-{split}-{seed}")
            parts[split] = _balanced(build(corpus.part(split), rng), CAPS[split], rng)
        if not parts["train"]:
            raise ValueError(f"corpus {corpus.name!r} yields no {name_or_csv!r} training examples: the "
                             f"task needs {TASK_CORPUS.get(str(name_or_csv), 'sotu')}-style documents "
                             "(with their metadata) and long enough paragraphs")
        return Task(str(name_or_csv), labels, **parts)
    path = Path(name_or_csv).expanduser()
    if path.suffix.lower() == ".csv" or path.is_file():
        return load_csv(path)
    raise ValueError(f"unknown task {str(name_or_csv)!r}: give one of {', '.join(TASKS)} or a CSV file "
                     "with columns text and label")


def load_csv(path: str | Path) -> Task:
    """A task from a CSV file with columns ``text``, ``label`` and optionally ``text_b`` and ``split``.

    Label strings become ints in sorted order (numerically when every label is an integer). With a
    ``split`` column (train, val or test) rows go where it says; without, by a hash of the row's
    text, 80/10/10.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no CSV file at {str(path)!r}")
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        columns = [c.strip() for c in reader.fieldnames or []]
        missing = [c for c in ("text", "label") if c not in columns]
        if missing:
            raise ValueError(f"{str(path)!r} has no {' or '.join(repr(c) for c in missing)} column (it has: "
                             f"{', '.join(columns) or 'none'}): a task CSV needs a header with columns text "
                             "and label, optionally text_b and split")
        rows = [{k.strip(): (v or "").strip() for k, v in row.items() if k} for row in reader]
    rows = [r for r in rows if r["text"] and r["label"]]
    names = sorted({r["label"] for r in rows})
    if all(n.lstrip("-").isdigit() for n in names):
        names.sort(key=int)
    if len(names) < 2:
        raise ValueError(f"{str(path)!r} needs at least two different labels, found {names}")
    parts = {s: [] for s in SPLITS}
    for i, r in enumerate(rows):
        text_b = r.get("text_b") or None
        split = r.get("split") or hash_split(f"{r['text']}\0{text_b or ''}")  # a duplicate row: one split
        split = {"validation": "val", "dev": "val"}.get(split, split)
        if split not in SPLITS:
            raise ValueError(f"{str(path)!r} row {i + 2}: split must be train, val or test, not {split!r}")
        parts[split].append(Example(r["text"], names.index(r["label"]), text_b, doc=f"{path.name}:{i + 2}"))
    if not parts["train"]:
        raise ValueError(f"{str(path)!r} has no training rows")
    return Task(path.stem, tuple(names), **parts)
