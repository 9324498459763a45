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
