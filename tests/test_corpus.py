import pytest

import bertgpt


def test_sotu_is_split_by_document_deterministically():
    corpus = bertgpt.load_corpus()
    assert len(corpus.documents) >= 240
    parts = [set(d.id for d in corpus.part(s)) for s in ("train", "val", "test")]
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert 0.7 < len(parts[0]) / len(corpus.documents) < 0.9 and len(parts[2]) >= 15
    assert parts == [set(d.id for d in bertgpt.load_corpus().part(s)) for s in ("train", "val", "test")]
    first = corpus.documents[0]
    assert first.meta["year"] == 1790 and first.meta["party"] and first.paragraphs


def test_kjv_is_a_chapter_a_document_a_verse_a_paragraph_in_the_bibles_order():
    corpus = bertgpt.load_corpus("kjv")
    assert len(corpus.documents) == 1189 and len(corpus.train) > 900 and len(corpus.test) > 100
    first, last = corpus.documents[0], corpus.documents[-1]
    assert first.id == "Genesis 1" and first.meta == dict(book="Genesis", book_index=0, chapter=1)
    assert first.paragraphs[0] == "In the beginning God created the heaven and the earth."
    assert len(first.paragraphs) == 31 and last.meta["book"] == "Revelation" and last.meta["book_index"] == 65


def test_folders_files_and_lists_load_and_bad_paths_say_what_to_do(tmp_path):
    (tmp_path / "a.txt").write_text("One paragraph.\n\nAnother one.")
    (tmp_path / "b.txt").write_text("Third.")
    assert len(bertgpt.load_corpus(tmp_path).documents) == 2
    assert len(bertgpt.load_corpus(["some text", "more text", " "]).documents) == 2
    single = bertgpt.load_corpus(tmp_path / "a.txt")
    assert single.documents[0].paragraphs == ["One paragraph.", "Another one."]
    with pytest.raises(FileNotFoundError, match="does not exist: give 'sotu', 'kjv', a folder"):
        bertgpt.load_corpus(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no non-empty .txt file"):
        bertgpt.load_corpus(tmp_path / "empty")


def test_shuffled_sentences_keep_the_words_and_layout_but_not_the_order(corpus):
    from collections import Counter

    shuffled = bertgpt.shuffle_sentences(corpus, seed=1)
    assert shuffled.name == "sotu-40-shuffled1" and shuffled.fingerprint != corpus.fingerprint
    assert [d.id for d in shuffled.documents] == [d.id for d in corpus.documents]

    def words(c):
        return Counter(w for d in c.train for p in d.paragraphs for w in p.split())

    assert words(shuffled) == words(corpus)
    assert [len(d.paragraphs) for d in shuffled.train] == [len(d.paragraphs) for d in corpus.train]
    assert shuffled.val == corpus.val and shuffled.test == corpus.test
    assert [d.text for d in shuffled.val] == [d.text for d in corpus.val]
    moved = sum(a.text != b.text for a, b in zip(shuffled.train, corpus.train))
    assert moved == len(corpus.train)  # every training document now mixes other addresses' sentences
    assert bertgpt.shuffle_sentences(corpus, seed=1).fingerprint == shuffled.fingerprint  # seeded


def test_subsample_keeps_a_seeded_share_of_training_documents_only(corpus):
    half = bertgpt.subsample(corpus, 0.5, seed=0)
    assert half.name == "sotu-40-0.5of0"
    assert len(half.train) == round(0.5 * len(corpus.train))
    assert {d.id for d in half.train} < {d.id for d in corpus.train}
    assert [d.text for d in half.val + half.test] == [d.text for d in corpus.val + corpus.test]
    assert [d.id for d in bertgpt.subsample(corpus, 0.5, seed=0).train] == [d.id for d in half.train]
    assert [d.id for d in bertgpt.subsample(corpus, 0.5, seed=1).train] != [d.id for d in half.train]
    with pytest.raises(ValueError, match="fraction must lie in"):
        bertgpt.subsample(corpus, 0)


def test_a_held_out_split_can_be_shuffled_instead(corpus):
    shuffled = bertgpt.shuffle_sentences(corpus, seed=0, split="val")
    assert shuffled.name == "sotu-40-val-shuffled0"
    assert [d.text for d in shuffled.train] == [d.text for d in corpus.train]
    assert [d.text for d in shuffled.val] != [d.text for d in corpus.val]
