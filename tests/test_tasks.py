import pytest

import bertgpt
from bertgpt.inputs import split_sentences
from bertgpt.tasks import TASKS, Example, Tagged, Task, load_task


@pytest.mark.parametrize("name", TASKS)
def test_tasks_keep_documents_within_one_split(request, name):
    corpus = request.getfixturevalue("bible" if name == "genre" else "corpus")  # the task's own corpus
    task = load_task(name, corpus)
    assert task == load_task(name, corpus)  # deterministic
    split_of = {d.id: d.split for d in corpus.documents}
    docs_with = {}
    for d in corpus.documents:
        for p in d.paragraphs:
            docs_with.setdefault(p, set()).add(d.id)
    for split in ("train", "val", "test"):
        examples = task.split(split)
        assert examples or split != "train"
        for e in examples:
            assert split_of[e.doc] == split and 0 <= e.label < task.n_classes
            if e.text_b is not None:  # paragraph B comes from a document of the same split
                assert any(split_of[d] == split for d in docs_with[e.text_b])
    assert {e.doc for e in task.test} <= {d.id for d in corpus.test}
    counts = [sum(e.label == k for e in task.train) for k in range(task.n_classes)]
    if name in ("next", "acceptability"):  # 50/50 by construction (the small corpus is short of some
        assert max(counts) - min(counts) <= 1  # parties and eras to balance those)


def test_genre_labels_each_verse_with_its_books_division(bible):
    from bertgpt.tasks import SECTIONS
    task = load_task("genre")  # the King James Bible is genre's own corpus
    assert task.labels == SECTIONS and len(task.train) == 1998 and len(task.test) == 996
    counts = [sum(e.label == k for e in task.train) for k in range(6)]
    assert max(counts) - min(counts) == 0  # 333 of each division
    by_id = {d.id: d for d in bertgpt.load_corpus("kjv").documents}
    books = {e.doc.rsplit(" ", 1)[0]: e.label for e in task.train}
    assert books["Genesis"] == 0 and books["Psalms"] == 2 and books["Acts"] == 4 and books["Revelation"] == 5
    assert all(e.text in by_id[e.doc].paragraphs and len(e.text.split()) >= 8 for e in task.train)
    with pytest.raises(ValueError, match="no 'genre' training examples"):
        load_task("genre", bertgpt.load_corpus(["a short text", "another"]))


def test_acceptability_negatives_are_one_neighbour_swap(corpus):
    task = load_task("acceptability", corpus)
    sentences = {" ".join(s.split()) for d in corpus.documents for p in d.paragraphs
                 for s in bertgpt.inputs.split_sentences(p)}
    for e in task.train[:200]:
        assert (e.text in sentences) == (e.label == 1)
        if e.label == 0:
            words = e.text.split()
            swaps = [i for i in range(len(words) - 1)
                     if " ".join([*words[:i], words[i + 1], words[i], *words[i + 2:]]) in sentences]
            assert swaps


def test_majority_baseline_and_subsample():
    ex = [Example(str(i), label) for i, label in enumerate([0, 1, 1, 1, 2, 2])]
    task = Task("toy", ("x", "y", "z"), train=ex, val=ex[:2], test=[Example("t", k) for k in (1, 1, 0, 0, 0)])
    assert task.majority_baseline() == pytest.approx(0.4)
    assert task.majority_baseline("val") == pytest.approx(0.5)
    small = task.subsample(3, seed=1)
    assert sorted(e.label for e in small.train) == [0, 1, 2] or len(small.train) == 3
    assert small.test == task.test and small.subsample(3, seed=1) == small.subsample(3, seed=1)


def test_trimmed_cuts_every_text_and_the_held_out_splits():
    ex = [Example("one two three four", 0, text_b="five six seven"), Example("eight", 1)]
    task = Task("toy", ("x", "y"), train=ex, val=ex * 3, test=ex * 4)
    short = task.trimmed(2, val=3, test=5)
    assert [e.text for e in short.train] == ["one two", "eight"]
    assert [e.text_b for e in short.train] == ["five six", None]
    assert [e.label for e in short.train] == [0, 1]
    assert (len(short.val), len(short.test)) == (3, 5) and task.trimmed(9).test == task.test
    with pytest.raises(ValueError, match="words >= 1"):
        task.trimmed(0)
    tagged = Task("tags", ("o", "b"), train=[Tagged(("a", "b"), (0, 1))], val=[], test=[])
    with pytest.raises(ValueError, match="labels each word"):
        tagged.trimmed(1)


def test_csv_tasks(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence,label\nhello,pos\n")
    with pytest.raises(ValueError, match="no 'text' column.*columns text and label"):
        load_task(bad)
    good = tmp_path / "good.csv"
    good.write_text("text,label,split\n" + "".join(f"row {i},{'neg' if i % 2 else 'pos'},{s}\n"
                                                   for i, s in enumerate(["train"] * 6 + ["val", "test"])))
    task = load_task(good)
    assert task.labels == ("neg", "pos") and len(task.train) == 6 and len(task.val) == len(task.test) == 1
    assert task.train[0] == Example("row 0", 1, doc="good.csv:2")
    with pytest.raises(ValueError, match="unknown task"):
        load_task("sentiment")


def test_boundaries_tag_the_last_word_of_each_sentence_without_its_punctuation(corpus):
    task = load_task("boundaries", corpus)
    assert task.token_level and not load_task("era", corpus).token_level
    sentences = {s.lower() for d in corpus.documents for p in d.paragraphs for s in split_sentences(p)}
    for e in task.train[:50]:
        assert len(e.words) == len(e.tags) and e.tags[-1] == bertgpt.IGNORE  # the last word gives itself away
        assert e.text == e.text.lower() and sum(e.tags[:-1]) >= 1  # two sentences or more
        start = 0
        for i, tag in enumerate((*e.tags[:-1], 1)):
            if tag == 1:  # each run of words up to a tag 1 is a sentence of the paragraph, its end cut
                words = e.words[start:i + 1]
                assert not words[-1].endswith((".", "!", "?"))
                assert any(s.startswith(" ".join(words)) for s in sentences)
                start = i + 1
    scored = [t for e in task.test for t in e.tags if t != bertgpt.IGNORE]
    assert task.majority_baseline() == scored.count(0) / len(scored) > 0.9  # "inside", per word
    assert len(task.subsample(10).train) == 10
