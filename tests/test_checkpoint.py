import json

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


def test_a_rotary_model_round_trips_without_a_position_table(tmp_path, bpe):
    model = tiny("gpt", vocab_size=bpe.vocab_size, positions="rotary").eval()
    bertgpt.save(tmp_path / "ck", model, bpe)
    loaded = bertgpt.load(tmp_path / "ck")
    assert loaded.model.config.positions == "rotary" and loaded.model.backbone.pos_emb is None
    idx = torch.randint(8, bpe.vocab_size, (1, 9))
    assert torch.equal(loaded.model(idx).logits, model(idx).logits)


def test_a_checkpoint_of_the_other_family_is_refused_by_name(tmp_path, bpe):
    bertgpt.save(tmp_path / "gpt", tiny("gpt", vocab_size=bpe.vocab_size), bpe)
    with pytest.raises(CheckpointError, match="holds a gpt model, but a bert model is needed"):
        bertgpt.load(tmp_path / "gpt", family="bert")


def test_a_truncated_checkpoint_is_refused(tmp_path, bpe):
    path = bertgpt.save(tmp_path / "ck", tiny("gpt", vocab_size=bpe.vocab_size), bpe)
    weights = path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="does not match the hash"):
        bertgpt.load(path)
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        bertgpt.load(tmp_path / "elsewhere")


def _damage(path, how):
    """Spoil a checkpoint directory ``path`` in one of the ways a real one gets spoilt."""
    config = path / "config.json"
    if how == "truncated config.json":
        config.write_text(config.read_text()[:40])
    elif how == "another format":
        config.write_text(json.dumps({**json.loads(config.read_text()), "format": 99}))
    elif how == "stale config":  # a field that this version's ModelConfig does not have
        info = json.loads(config.read_text())
        config.write_text(json.dumps({**info, "config": {**info["config"], "n_layers": 2}}))
    elif how == "empty directory":
        for f in path.iterdir():
            f.unlink()


DAMAGES = ["truncated config.json", "another format", "stale config", "empty directory"]


@pytest.mark.parametrize("how", DAMAGES)
def test_a_malformed_checkpoint_raises_the_packages_error_naming_the_file_and_the_fix(tmp_path, bpe, how):
    path = bertgpt.save(tmp_path / "ck", tiny("gpt", vocab_size=bpe.vocab_size), bpe)
    _damage(path, how)
    with pytest.raises(CheckpointError, match=r"(config\.json|incomplete).*(save or train|train it)"):
        bertgpt.load(path)


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


def test_one_loader_for_both_kinds_refuses_the_other_kind(tmp_path, bert_ck, party):
    clf = bertgpt.Classifier(bert_ck.model, bert_ck.tokenizer, party.labels, lm_coef=0.0)
    bertgpt.save_classifier(tmp_path / "clf", clf)
    bertgpt.save(tmp_path / "plain", bert_ck.model, bert_ck.tokenizer)
    with pytest.raises(CheckpointError, match="holds a model, not a classifier: load it with bertgpt.load$"):
        bertgpt.load_classifier(tmp_path / "plain")
    with pytest.raises(CheckpointError, match="holds a classifier, not a model: load it with bertgpt.load_c"):
        bertgpt.load(tmp_path / "clf")
    with pytest.raises(CheckpointError, match="no training state"):
        bertgpt.checkpoint.load_training_state(tmp_path / "plain")
