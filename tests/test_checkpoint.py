import os

import pytest
import torch

import bertgpt
from bertgpt.checkpoint import CheckpointError
from conftest import tiny


def test_a_checkpoint_round_trips_bit_exactly(tmp_path, wordpiece):
    model = tiny("bert", vocab_size=wordpiece.vocab_size)
    bertgpt.save(tmp_path / "ck", model, wordpiece, metrics={"val_loss": 1.5})
    loaded = bertgpt.load(tmp_path / "ck", family="bert")
    for (name, p), (_, q) in zip(model.state_dict().items(), loaded.model.state_dict().items()):
        assert torch.equal(p, q), name
    assert loaded.model.mlm_decoder.weight is loaded.model.backbone.tok_emb.weight
    assert loaded.model.config == model.config
    assert loaded.tokenizer.encode("the union") == wordpiece.encode("the union")
    assert loaded.info["metrics"] == {"val_loss": 1.5}


def test_a_checkpoint_of_the_other_family_is_refused_by_name(tmp_path, bpe):
    bertgpt.save(tmp_path / "gpt", tiny("gpt", vocab_size=bpe.vocab_size), bpe)
    with pytest.raises(CheckpointError, match="holds a gpt model, but a bert model is needed"):
        bertgpt.load(tmp_path / "gpt", family="bert")


def test_a_truncated_checkpoint_is_refused(tmp_path, bpe):
    path = bertgpt.save(tmp_path / "ck", tiny("gpt", vocab_size=bpe.vocab_size), bpe)
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="corrupt"):
        bertgpt.load(path)
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        bertgpt.load(tmp_path / "elsewhere")


def test_an_interrupted_save_leaves_the_previous_checkpoint_intact(tmp_path, bpe, monkeypatch):
    first = tiny("gpt", vocab_size=bpe.vocab_size)
    bertgpt.save(tmp_path / "ck", first, bpe, step=1)
    second = tiny("gpt", vocab_size=bpe.vocab_size)
    with torch.no_grad():
        second.backbone.tok_emb.weight.add_(1.0)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the user pressed Ctrl-C while the weights were being written

    monkeypatch.setattr("bertgpt.checkpoint.save_model", killed)
    with pytest.raises(KeyboardInterrupt):
        bertgpt.save(tmp_path / "ck", second, bpe, step=2)
    monkeypatch.undo()
    loaded = bertgpt.load(tmp_path / "ck")
    assert loaded.info["step"] == 1
    assert torch.equal(loaded.model.backbone.tok_emb.weight, first.backbone.tok_emb.weight)


def test_pretrained_trains_once_then_loads_and_rebuilds_a_damaged_entry(corpus):
    first = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False)
    directory, _, _ = bertgpt.hub.cache_path("gpt-tiny", corpus)
    stamp = os.stat(directory / "model.safetensors").st_mtime_ns
    again = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False)
    assert os.stat(directory / "model.safetensors").st_mtime_ns == stamp  # loaded, not retrained
    assert torch.equal(first.model.lm_head.weight, again.model.lm_head.weight)
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # a half-written file
    with pytest.warns(UserWarning, match="rebuilding the cached gpt-tiny"):
        rebuilt = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False)
    assert torch.equal(rebuilt.model.lm_head.weight, first.model.lm_head.weight)  # seeded: same model
    assert rebuilt.info["metrics"]["val_loss"] < rebuilt.info["history"]["train"][0]["loss"]


def test_unknown_pretrained_name_lists_the_choices():
    with pytest.raises(ValueError, match="choose one of gpt-tiny"):
        bertgpt.pretrained("gpt-huge")
