from collections import Counter

import pytest

from bertgpt.inputs import (
    bert_inputs,
    bert_whole,
    gpt_inputs,
    hash_split,
    pad,
    split_sentences,
    truncate_pair,
)


def test_one_pair_rule_keeps_the_junction_and_fills_the_budget():
    a, b = list(range(10)), list(range(100, 110))
    assert truncate_pair(a, b, 7) == ([6, 7, 8, 9], [100, 101, 102])  # A keeps its end, B its start
    assert truncate_pair(a, [100], 7) == ([4, 5, 6, 7, 8, 9], [100])  # the short side is kept whole
    assert truncate_pair([1], b, 4) == ([1], [100, 101, 102])
    assert truncate_pair(a, None, 3) == ([0, 1, 2], None)  # a single text loses its end
    assert truncate_pair(a, b, 40) == (a, b)


def test_packing_follows_each_paper(wordpiece):
    tok = wordpiece
    assert bert_inputs(tok, [10, 11], [12]) == ([tok.cls_id, 10, 11, tok.sep_id, 12, tok.sep_id],
                                               [0, 0, 0, 0, 1, 1])
    assert gpt_inputs(tok, [10], [12]) == [tok.start_id, 10, tok.delim_id, 12, tok.extract_id]
    assert gpt_inputs(tok, [10]) == [tok.start_id, 10, tok.extract_id]
    assert bert_whole(tok, [10], 3) == [tok.cls_id, 10, tok.sep_id]
    with pytest.raises(ValueError, match="shorten it to at most 1 tokens"):
        bert_whole(tok, [10, 11], 3)
    assert pad([[1, 2, 3], [4]], 0).tolist() == [[1, 2, 3], [4, 0, 0]]


def test_the_hash_split_is_deterministic_and_about_80_10_10():
    counts = Counter(hash_split(f"doc-{i}") for i in range(5000))
    assert hash_split("doc-1") == hash_split("doc-1")
    assert counts["train"] / 5000 == pytest.approx(0.8, abs=0.03)
    assert counts["val"] / 5000 == pytest.approx(0.1, abs=0.02)


def test_sentences_end_at_a_stop_before_a_capital():
    assert split_sentences("It is done. Now we go! Is it? yes. 1790 came.") == [
        "It is done.", "Now we go!", "Is it? yes.", "1790 came."]


def test_packing_is_importable_from_finetune_as_before():
    from bertgpt.finetune import collate, pack_examples
    from bertgpt.inputs import collate as collate_here
    from bertgpt.inputs import pack_examples as pack_here
    assert pack_examples is pack_here and collate is collate_here
