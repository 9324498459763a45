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


@pytest.mark.parametrize("kind", ["bpe", "wordpiece", "char"])
def test_the_same_texts_give_the_same_tokenizer_id_for_id(kind, bible):
    # Hugging Face's trainers number some tokens in hash-map order, which changes from run to run
    texts = [d.text for d in bible.train]
    first, again = (bertgpt.train_tokenizer(texts, kind, 600, progress=False) for _ in range(2))
    assert first.hf.to_str() == again.hf.to_str()


def test_merges_take_the_most_frequent_pair_and_break_ties_by_sorting():
    from collections import Counter

    from bertgpt.tokenizer import SPECIAL_TOKENS, learn_merges
    words = Counter(low=5, lower=2, newest=6, widest=3)  # Sennrich et al.'s example
    start = len(SPECIAL_TOKENS) + 10 + 3  # ten letters, three of them also ending a word (+ </w>)
    vocab, merges = learn_merges(words, start + 3, suffix="</w>")
    # e+s and s+t</w> both occur 9 times: "e" sorts first; then es+t</w> (9), then l+o (7)
    assert merges == [("e", "s"), ("es", "t</w>"), ("l", "o")]
    assert {"est</w>", "lo", "w</w>"} <= set(vocab) and sorted(vocab.values()) == list(range(start + 3))
    # WordPiece marks continuations: n+t becomes ##n+##t (5, a tie with u+##n won by sorting), then
    # u+##nt joins as "unt", the right-hand piece's mark dropped
    _, merges = learn_merges(Counter(unto=3, until=2), len(SPECIAL_TOKENS) + 11 + 2, prefix="##")
    assert merges == [("##n", "##t"), ("u", "##nt")]
