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
