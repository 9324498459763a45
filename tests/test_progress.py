from bertgpt.probes import probe
from bertgpt.progress import progress_bar
from bertgpt.tokenizer import train_tokenizer


def test_a_bar_shows_unless_switched_off_or_bertgpt_quiet_is_set(monkeypatch):
    monkeypatch.delenv("BERTGPT_QUIET")
    assert not progress_bar(range(3), "x").disable
    assert progress_bar(range(3), "x", enabled=False).disable
    monkeypatch.setenv("BERTGPT_QUIET", "1")
    assert progress_bar(range(3), "x").disable


def test_probe_and_tokenizer_training_show_bars_by_default(gpt_ck, party, corpus, monkeypatch, capsys):
    monkeypatch.delenv("BERTGPT_QUIET")
    probe(gpt_ck, party, max_examples=30, steps=5)
    train_tokenizer([p for d in corpus.train[:3] for p in d.paragraphs], "bpe", 300)
    shown = capsys.readouterr().err
    for label in ("probe gpt on party: train features", "test features", "fit each layer",
                  "train bpe tokenizer"):
        assert label in shown
    probe(gpt_ck, party, max_examples=30, steps=5, progress=False)
    assert capsys.readouterr().err == ""
