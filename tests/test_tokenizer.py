import pytest

import bertgpt


@pytest.mark.parametrize("kind", ["bpe", "wordpiece", "char"])
def test_tokenizers_share_special_ids_and_round_trip(kind, corpus, tmp_path):
    tok = bertgpt.train_tokenizer([p for d in corpus.train for p in d.paragraphs], kind, 600)
    assert (tok.pad_id, tok.cls_id, tok.sep_id, tok.mask_id, tok.extract_id) == (0, 2, 3, 4, 7)
    assert tok.kind == kind
    text = "the state of the union"
    assert tok.decode(tok.encode(text)).replace(" ", "") == text.replace(" ", "")
    tok.save(tmp_path / "t.json")
    assert bertgpt.Tokenizer.load(tmp_path / "t.json").encode(text) == tok.encode(text)


def test_tokenizer_for_caches_and_rebuilds_a_damaged_file(corpus):
    tok = bertgpt.tokenizer_for(corpus, "wordpiece", 500)
    path = next((bertgpt.tokenizer.cache_dir() / "tokenizers").glob("*wordpiece-500*"))
    path.write_text("{ truncated")
    assert bertgpt.tokenizer_for(corpus, "wordpiece", 500).encode("union") == tok.encode("union")


def test_coverage_counts_unknown_tokens_and_words_cut_into_three_pieces_or_more(bpe, bible):
    from bertgpt.tokenizer import coverage
    assert coverage(bpe, ["the the the"]) == dict(words=3, tokens_per_word=1.0, unknown_rate=0.0,
                                                  split_words=0.0)
    made_up = coverage(bpe, ["xqzvkrplm the"])  # a word the vocabulary has never seen, and one it has
    assert made_up["split_words"] == 0.5 and made_up["unknown_rate"] == 0.0
    assert coverage(bpe, ["ωψ the"])["unknown_rate"] > 0  # characters outside the alphabet
    verses = [p for d in bible.documents for p in d.paragraphs]
    own = bertgpt.train_tokenizer(verses, "bpe", bpe.vocab_size)  # the same size, trained on the Bible
    abroad, at_home = coverage(bpe, verses), coverage(own, verses)
    assert abroad["tokens_per_word"] > at_home["tokens_per_word"]
    assert abroad["split_words"] > at_home["split_words"]
    with pytest.raises(ValueError, match="at least one"):
        coverage(bpe, ["  "])
