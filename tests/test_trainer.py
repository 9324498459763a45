import copy
import dataclasses
import itertools

import pytest
import torch

import bertgpt
from bertgpt.pretraining import clm_loss
from bertgpt.trainer import KeepBest, lr_factor, resolve_precision
from conftest import tiny


def _stream(seed=0):
    """Endless random (inputs, targets) batches for the tiny GPT."""
    g = torch.Generator().manual_seed(seed)
    while True:
        yield torch.randint(8, 512, (4, 16), generator=g), torch.randint(8, 512, (4, 16), generator=g)


def test_warmup_then_decay_schedule():
    cfg = bertgpt.TrainConfig(steps=100, warmup=10, decay="cosine")
    factors = [lr_factor(s, cfg) for s in range(100)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(factors[9:], factors[10:]))
    assert factors[-1] < 0.01
    linear = bertgpt.TrainConfig(steps=100, warmup=10, decay="linear")
    assert lr_factor(55, linear) == pytest.approx(0.5)


def test_gradient_accumulation_matches_one_large_batch():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randint(8, 512, (8, 16), generator=g), torch.randint(8, 512, (8, 16), generator=g)
    results = []
    for batch_size, accumulate in [(8, 1), (4, 2)]:
        model = tiny("gpt")
        halves = iter([(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, 8, batch_size)])
        cfg = bertgpt.TrainConfig(steps=1, batch_size=batch_size, accumulate=accumulate, warmup=1,
                                  grad_clip=0, precision="fp32")  # bf16 rounds differently per batch shape
        bertgpt.train(model, clm_loss, halves, cfg, progress=False)
        results.append(model.backbone.tok_emb.weight.detach().clone())
    assert torch.allclose(results[0], results[1], atol=1e-6)


def test_one_optimizer_and_one_schedule_serve_the_whole_run():
    cfg = bertgpt.TrainConfig(steps=30, batch_size=4, lr=1e-3, warmup=5, decay="linear", eval_every=10)
    history = bertgpt.train(tiny("gpt"), clm_loss, _stream(), cfg, evaluate=lambda run: {}, progress=False)
    assert [r["step"] for r in history.val] == [10, 20, 30]
    for r in history.train:  # the rate after each update follows warm-up then linear decay, never restarting
        assert r["lr"] == pytest.approx(1e-3 * lr_factor(r["step"], cfg))


def test_keep_best_stops_after_patience_and_restores_the_best_weights():
    scores = iter([0.5, 0.7, 0.6, 0.6, 0.9])
    seen = {}

    def score(run):
        seen[run.step] = copy.deepcopy(run.model.state_dict())
        return dict(accuracy=next(scores))

    model = tiny("gpt")
    keep = KeepBest(score, "accuracy", patience=2)
    cfg = bertgpt.TrainConfig(steps=50, batch_size=4, warmup=1, eval_every=5)
    history = bertgpt.train(model, clm_loss, _stream(), cfg, evaluate=keep, progress=False)
    assert [r["step"] for r in history.val] == [5, 10, 15, 20]  # stopped: two evaluations without a better
    assert (keep.best, keep.best_step) == (0.7, 10)
    keep.restore(model)
    assert all(torch.equal(v, seen[10][k]) for k, v in model.state_dict().items())


def test_keep_best_keeps_a_started_decision_that_training_never_beats():
    scores = iter([0.6, 0.7, 0.5])
    model = tiny("gpt")
    start = copy.deepcopy(model.state_dict())
    keep = KeepBest(lambda run: dict(accuracy=next(scores)), "accuracy", patience=2)
    keep.start(model, dict(accuracy=0.8))  # the weights before the first update score 0.8
    cfg = bertgpt.TrainConfig(steps=50, batch_size=4, warmup=1, eval_every=5)
    history = bertgpt.train(model, clm_loss, _stream(), cfg, evaluate=keep, progress=False)
    assert [r["step"] for r in history.val] == [5, 10]  # two evaluations below the start: stopped
    assert (keep.best, keep.best_step) == (0.8, 0)
    keep.restore(model)
    assert all(torch.equal(v, start[k]) for k, v in model.state_dict().items())


def test_a_resumed_run_reaches_the_weights_of_an_uninterrupted_one():
    cfg = bertgpt.TrainConfig(steps=12, batch_size=4, warmup=3, eval_every=4)
    whole = tiny("gpt", dropout=0.1)
    bertgpt.train(whole, clm_loss, _stream(), cfg, progress=False)
    saved = {}

    def stop_at_8(run):
        if run.step == 8:
            saved.update(weights=copy.deepcopy(run.model.state_dict()), state=run.state_dict())
            run.stop = True
        return {}

    bertgpt.train(tiny("gpt", dropout=0.1), clm_loss, _stream(), cfg, evaluate=stop_at_8, progress=False)
    resumed = tiny("gpt", dropout=0.1)
    resumed.load_state_dict(saved["weights"])
    history = bertgpt.train(resumed, clm_loss, _stream(), cfg, progress=False, resume=saved["state"])
    assert history.train[-1]["step"] == 12
    assert all(torch.equal(p, q) for p, q in zip(whole.parameters(), resumed.parameters()))


def test_validate_restores_the_mode_it_found():
    model = tiny("gpt").train()
    batches = list(itertools.islice(_stream(), 2))
    assert bertgpt.validate(model, clm_loss, batches)["loss"] > 0 and model.training


def test_bf16_autocast_on_the_cpu_trains_as_fp32_does_within_rounding():
    cfg = bertgpt.TrainConfig(steps=5, batch_size=4, warmup=1)
    losses = {}
    for name in ("fp32", "bf16"):
        history = bertgpt.train(tiny("gpt"), clm_loss, _stream(), dataclasses.replace(cfg, precision=name),
                                progress=False)
        assert history.setup["precision"] == name
        losses[name] = history.train[-1]["loss"]
    assert losses["bf16"] == pytest.approx(losses["fp32"], abs=0.05)


def test_precision_is_checked_by_name_and_fp16_asks_for_a_gpu():
    assert resolve_precision("cpu", "bf16") == "bf16"
    with pytest.raises(ValueError, match="needs a CUDA device"):
        resolve_precision("cpu", "fp16")
    with pytest.raises(ValueError, match="precision must be"):
        bertgpt.TrainConfig(precision="fp8")
