"""bertgpt.hub: the cache of pretrained models, shared safely between processes."""

import dataclasses
import os
import shutil
import subprocess
import sys
import textwrap
import time
import unittest.mock

import pytest
import torch

import bertgpt
from bertgpt.pretraining import RunRecord
from test_checkpoint import DAMAGES, _damage


def test_pretrained_trains_once_then_loads_and_rebuilds_a_damaged_entry(corpus):
    first = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False)
    directory = bertgpt.hub.cache_path("gpt-tiny", corpus)
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
    # the same typed record the command line writes (tests/test_cli.py), named
    record = RunRecord(**{f.name: rebuilt.info[f.name] for f in dataclasses.fields(RunRecord)})
    assert (record.name, record.corpus_fingerprint) == ("gpt-tiny", corpus.fingerprint)
    assert record.step == record.train["steps"] == record.metrics["steps"] and record.tokenizer_kind == "bpe"


@pytest.mark.parametrize("how", DAMAGES)
def test_a_malformed_cache_entry_is_rebuilt(corpus, how):
    first = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False)
    _damage(bertgpt.hub.cache_path("gpt-tiny", corpus), how)
    with pytest.warns(UserWarning, match="rebuilding the cached gpt-tiny"):
        rebuilt = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False)
    assert torch.equal(rebuilt.model.lm_head.weight, first.model.lm_head.weight)


def test_untrained_gives_the_architecture_and_tokenizer_and_never_pretrains(corpus):
    blank = bertgpt.untrained("bert-tiny", corpus=corpus, seed=1)
    cfg, _ = bertgpt.hub.pretrained_configs("bert-tiny")
    assert blank.model.family == "bert" and blank.config.n_layer == cfg.n_layer
    assert blank.config.vocab_size == blank.tokenizer.vocab_size
    assert not (bertgpt.tokenizer.cache_dir() / "models").exists() or not any(
        p.name.startswith("bert-tiny") for p in (bertgpt.tokenizer.cache_dir() / "models").iterdir())
    again = bertgpt.untrained("bert-tiny", corpus=corpus, seed=1)
    assert torch.equal(blank.model.backbone.tok_emb.weight, again.model.backbone.tok_emb.weight)


def test_unknown_pretrained_name_lists_the_choices():
    with pytest.raises(ValueError, match="choose one of gpt-tiny"):
        bertgpt.pretrained("gpt-huge")


CHILD = textwrap.dedent("""
    import sys
    import torch
    import bertgpt
    from bertgpt import pretraining

    torch.set_num_threads(1)
    trained = pretraining.pretrain
    def logged(*args, **kwargs):  # record every pretraining run this process starts
        with open(sys.argv[1], "a") as f:
            f.write("trained\\n")
        return trained(*args, **kwargs)
    pretraining.pretrain = logged
    full = bertgpt.load_corpus("sotu")
    corpus = bertgpt.Corpus("sotu-40", full.documents[::6][:40])
    ck = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False)
    print(sum(float(p.sum()) for p in ck.model.parameters()))
""")


def test_two_processes_asking_for_a_cold_model_train_it_once(tmp_path):
    log = tmp_path / "runs.log"
    env = {**os.environ, "BERTGPT_CACHE": str(tmp_path / "cache")}  # empty: other tests filled the shared one
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(log)], stdout=subprocess.PIPE, text=True,
                                 env=env) for _ in range(2)]
    outputs = [child.communicate(timeout=300)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0]
    assert log.read_text().splitlines() == ["trained"]  # the second waited on the lock, then loaded
    assert outputs[0] == outputs[1]  # and both got the same weights


RESUMABLE = dict(steps=300, eval_every=20, snapshots=(40,))
INTERRUPTED = textwrap.dedent(f"""
    import torch
    import bertgpt

    torch.set_num_threads(1)
    full = bertgpt.load_corpus("sotu")
    corpus = bertgpt.Corpus("sotu-40", full.documents[::6][:40])
    bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False, changes={RESUMABLE!r})
""")


def test_an_interrupted_cold_pretrained_resumes_where_it_stopped(corpus, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("BERTGPT_CACHE", str(cache))
    directory = bertgpt.hub.cache_path("gpt-tiny", corpus, changes=RESUMABLE)
    partial = directory.with_name(directory.name + ".partial")
    snapshot = bertgpt.hub.snapshot_path(directory, 40)
    env = {**os.environ, "BERTGPT_CACHE": str(cache)}
    child = subprocess.Popen([sys.executable, "-c", INTERRUPTED], env=env)
    deadline = time.monotonic() + 240
    while not ((partial / "training.pt").exists() and snapshot.exists()) and child.poll() is None:
        assert time.monotonic() < deadline, "the run never saved a resumable state"
        time.sleep(0.02)
    child.kill()  # mid-run: after the snapshot at update 40, long before update 300
    child.wait()
    assert not directory.exists() and (partial / "training.pt").exists()

    def refuse(*args, **kwargs):
        raise AssertionError("the interrupted run was started again from update 0")

    with monkeypatch.context() as m:
        m.setattr(bertgpt.pretraining, "pretrain", refuse)
        resumed = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False, changes=RESUMABLE)
    assert not partial.exists() and resumed.info["step"] == 300
    early = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False, changes=RESUMABLE, step=40)
    for path in (directory, snapshot.parent):  # the same run again, uninterrupted, on the same tokenizer
        shutil.rmtree(path)
    whole = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False, changes=RESUMABLE)
    whole_early = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False, changes=RESUMABLE, step=40)
    assert resumed.info["weights_sha256"] == whole.info["weights_sha256"]  # the same run, interrupted or not
    assert early.info["weights_sha256"] == whole_early.info["weights_sha256"]


def test_how_a_run_executes_is_not_part_of_the_cache_key_but_what_it_learns_is(corpus):
    before = bertgpt.hub.cache_path("gpt-mini", corpus)
    faster = dict(precision="bf16", compile=True)
    assert bertgpt.hub.cache_path("gpt-mini", corpus, changes=faster) == before
    for variant in (dict(lr=1e-3), dict(n_layer=2), dict(snapshots=(5,))):
        assert bertgpt.hub.cache_path("gpt-mini", corpus, changes=variant) != before


def test_every_field_of_the_recipe_is_in_the_cache_key(corpus):
    before = bertgpt.hub.cache_path("bert-mini", corpus)
    recipe = bertgpt.train_config("mini", "bert")
    other = dict(steps=7, batch_size=3, accumulate=2, lr=1e-5, warmup=3, decay="linear", weight_decay=0.5,
                 grad_clip=0.5, eval_every=7, eval_batches=2, seed=5, mask_rate=0.3, mask_split=(1, 0, 0),
                 nsp=False, short_fraction=0.25, short_length=16, dropout=0.3, snapshots=(2,),
                 val_mask_rate=0.2)
    fields = {f.name for f in dataclasses.fields(recipe)} - set(bertgpt.hub.RUN_ONLY)
    assert fields == set(other), "a new training field needs a changed value here"
    for name, value in other.items():
        assert getattr(recipe, name) != value
        assert bertgpt.hub.cache_path("bert-mini", corpus, changes={name: value}) != before, name


def test_every_model_on_the_addresses_reads_the_shipped_tokenizer_whichever_comes_first(tmp_path,
                                                                                         monkeypatch):
    monkeypatch.setenv("BERTGPT_CACHE", str(tmp_path))  # empty: no course model loaded before
    shipped = {f: bertgpt.pretrained(f"{f}-mini").tokenizer.hf.to_str() for f in ("gpt", "bert")}
    shutil.rmtree(tmp_path / "tokenizers")  # as if the course models had never been loaded
    lstm = bertgpt.untrained("lstm-mini")  # not a course model, and the first to ask for a BPE here
    wordpiece_gpt = bertgpt.untrained("gpt-mini", changes=dict(n_layer=2))
    assert lstm.tokenizer.hf.to_str() == shipped["gpt"]
    assert bertgpt.hub.share_tokenizer(bertgpt.load_corpus(), wordpiece_gpt.model.config, "wordpiece")
    assert bertgpt.tokenizer.tokenizer_for(bertgpt.load_corpus(), "wordpiece").hf.to_str() == shipped["bert"]


def test_an_entry_whose_tokenizer_is_learned_is_keyed_by_the_tokenizer_trainer(corpus, monkeypatch):
    learned = bertgpt.hub.cache_path("gpt-tiny", corpus)  # another corpus and vocabulary: learned here
    shipped = bertgpt.hub.cache_path("gpt-mini", bertgpt.load_corpus(), course=False)
    monkeypatch.setattr(bertgpt.cache, "TOKENIZER_TRAINER", bertgpt.cache.TOKENIZER_TRAINER + 1)
    assert bertgpt.hub.cache_path("gpt-tiny", corpus) != learned  # a new trainer: retrained, not reused
    assert bertgpt.hub.cache_path("gpt-mini", bertgpt.load_corpus(), course=False) == shipped


def test_a_shipped_model_is_found_by_its_recipe_and_a_field_added_later_changes_no_match(corpus):
    addresses = bertgpt.load_corpus()
    for name in ("gpt-mini", "bert-mini", "bert-mini-mlm", "bert-mini-ltr"):
        cfg, tcfg = bertgpt.hub.pretrained_configs(name, course=True)
        kind = bertgpt.hub.recipe_tokenizer(name)
        assert bertgpt.hub.shipped_path(name, addresses, cfg, tcfg, kind) == bertgpt.hub.SHIPPED / name
        assert bertgpt.hub.shipped_path(name, corpus, cfg, tcfg, kind) is None  # another corpus
        other = dataclasses.replace(tcfg, lr=tcfg.lr / 2)
        assert bertgpt.hub.shipped_path(name, addresses, cfg, other, kind) is None  # another recipe
        faster = dataclasses.replace(tcfg, precision="fp32", compile=True)  # how it runs: the same model
        assert bertgpt.hub.shipped_path(name, addresses, cfg, faster, kind) is not None
    # a field the configs gain after a model ships reads as its default: stored without it, it still matches
    info = bertgpt.hub._shipped_info("bert-mini")
    cfg, tcfg = bertgpt.hub.pretrained_configs("bert-mini", course=True)
    older = {**info, "train": {k: v for k, v in info["train"].items() if k != "val_mask_rate"}}
    with unittest.mock.patch.object(bertgpt.hub, "_shipped_info", lambda name: older):
        assert bertgpt.hub.shipped_path("bert-mini", addresses, cfg, tcfg, "wordpiece") is not None
        changed = dataclasses.replace(tcfg, val_mask_rate=0.2)  # until a recipe sets it otherwise
        assert bertgpt.hub.shipped_path("bert-mini", addresses, cfg, changed, "wordpiece") is None
    assert bertgpt.hub.shipped_path("bert-mini", addresses, cfg, tcfg, "bpe") is None  # other tokens


def test_a_variant_is_trained_with_its_changes_and_keeps_its_snapshots(corpus):
    changes = dict(steps=30, snapshots=(10, 20, 99))  # 99 is past the end: dropped
    final = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False, changes=changes)
    assert final.info["train"]["steps"] == 30 and final.info["train"]["snapshots"] == [10, 20]
    assert [r["step"] for r in final.info["history"]["val"]] == [10, 20, 25, 30]  # snapshots are evaluated
    early = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False, changes=changes, step=10)
    assert early.info["step"] == 10 and final.info["step"] == 30
    assert not torch.equal(early.model.lm_head.weight, final.model.lm_head.weight)
    assert torch.equal(bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False, changes=changes,
                                          step=30).model.lm_head.weight, final.model.lm_head.weight)
    with pytest.raises(ValueError, match="after updates 10, 20 and 30 .* not 15"):
        bertgpt.pretrained("gpt-tiny", corpus=corpus, changes=changes, step=15)
    with pytest.raises(ValueError, match="unknown field 'stepz'"):
        bertgpt.pretrained("gpt-tiny", corpus=corpus, changes=dict(stepz=3))


def test_an_entry_whose_snapshot_is_damaged_is_rebuilt(corpus):
    changes = dict(steps=20, snapshots=(10,))
    first = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False, changes=changes, step=10)
    directory = bertgpt.hub.cache_path("gpt-tiny", corpus, changes=changes)
    (bertgpt.hub.snapshot_path(directory, 10) / "model.safetensors").write_bytes(b"")
    with pytest.warns(UserWarning, match="rebuilding the cached gpt-tiny"):
        again = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False, changes=changes, step=10)
    assert torch.equal(first.model.lm_head.weight, again.model.lm_head.weight)


def test_another_tokenizer_kind_is_its_own_entry_and_the_familys_own_kind_changes_no_key(corpus):
    own = bertgpt.hub.cache_path("gpt-tiny", corpus)
    assert bertgpt.hub.cache_path("gpt-tiny", corpus, tokenizer="bpe") == own
    assert bertgpt.hub.cache_path("gpt-tiny", corpus, tokenizer="char") != own
    ck = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False, tokenizer="char")
    assert ck.tokenizer.kind == "char" and ck.info["tokenizer_kind"] == "char"
    assert ck.model.config.vocab_size == ck.tokenizer.vocab_size < 200
    assert bertgpt.hub.cache_path("gpt-tiny", corpus, tokenizer="char").exists()


def test_adapted_continues_a_cached_model_once_and_keys_the_corpus_and_the_steps(corpus, bible):
    first = bertgpt.adapted("gpt-tiny", bible, steps=6, base=corpus, progress=False)
    directory = bertgpt.hub.adapted_path("gpt-tiny", bible, 6, base=corpus)
    assert directory.name.startswith(bertgpt.hub.cache_path("gpt-tiny", corpus).name + "+kjv-40-6-")
    stamp = os.stat(directory / "model.safetensors").st_mtime_ns
    again = bertgpt.adapted("gpt-tiny", bible, steps=6, base=corpus, progress=False)
    assert os.stat(directory / "model.safetensors").st_mtime_ns == stamp  # loaded, not retrained
    for p, q in zip(first.model.state_dict().values(), again.model.state_dict().values()):
        assert torch.equal(p, q)
    base = bertgpt.pretrained("gpt-tiny", corpus=corpus, progress=False)
    assert first.tokenizer.hf.to_str() == base.tokenizer.hf.to_str()  # the tokenizer is kept
    assert not torch.equal(first.model.lm_head.weight, base.model.lm_head.weight)
    assert first.info["init"] == bertgpt.hub.cache_path("gpt-tiny", corpus).name  # where it started
    assert first.info["coverage"]["reference"]["corpus"] == corpus.name
    assert first.info["metrics"]["val_loss"] < first.info["start"]["loss"]
    fewer = bertgpt.Corpus("kjv-40", bible.documents[1:])  # same name, other content
    others = {bertgpt.hub.adapted_path("gpt-tiny", bible, 7, base=corpus),
              bertgpt.hub.adapted_path("gpt-tiny", fewer, 6, base=corpus),
              bertgpt.hub.adapted_path("gpt-tiny", bible, 6, base=corpus, recipe=dict(lr=1e-4)),
              bertgpt.hub.adapted_path("gpt-tiny", bible, 6, base=corpus, changes=dict(steps=30))}
    assert directory not in others and len(others) == 4
    longer = bertgpt.adapted("gpt-tiny", bible, steps=7, base=corpus, progress=False)
    assert longer.info["train"]["steps"] == 7 and directory.exists()


def test_a_damaged_adapted_entry_is_rebuilt_to_the_same_weights(corpus, bible):
    first = bertgpt.adapted("bert-tiny", bible, steps=4, base=corpus, progress=False)
    directory = bertgpt.hub.adapted_path("bert-tiny", bible, 4, base=corpus)
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.warns(UserWarning, match="rebuilding the cached bert-tiny"):
        rebuilt = bertgpt.adapted("bert-tiny", bible, steps=4, base=corpus, progress=False)
    for p, q in zip(first.model.state_dict().values(), rebuilt.model.state_dict().values()):
        assert torch.equal(p, q)


def test_training_threads_takes_BERTGPT_THREADS_and_gives_the_caller_its_own_back(monkeypatch):
    torch.set_num_threads(1)
    monkeypatch.setenv("BERTGPT_THREADS", "2")
    with bertgpt.device.training_threads():
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == 1
    monkeypatch.setenv("BERTGPT_THREADS", "two")
    with pytest.raises(ValueError, match="BERTGPT_THREADS must be a whole number"):
        with bertgpt.device.training_threads():
            pass
    assert torch.get_num_threads() == 1


@pytest.mark.skipif((os.cpu_count() or 1) < 2 or not os.path.exists("/proc/stat"),
                    reason="needs two cores and Linux's /proc/stat")
def test_idle_cores_leaves_out_a_core_another_process_is_busy_on():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # the loop is spinning
        assert 1 <= bertgpt.device.idle_cores(window=0.5) <= os.cpu_count() - 1
    finally:
        busy.kill()
        busy.wait()


def test_adapted_goes_on_with_the_masked_objective_from_a_left_to_right_model(corpus):
    masked = bertgpt.adapted("gpt-tiny", corpus, steps=3, base=corpus, objective="masked", progress=False)
    assert isinstance(masked.model, bertgpt.BERT) and not masked.model.config.causal
    assert "mlm_accuracy" in masked.info["metrics"] and masked.info["train"]["nsp"] is False
    assert masked.info["init"].endswith(", as masked")
    own = bertgpt.hub.adapted_path("gpt-tiny", corpus, 3, base=corpus)
    assert bertgpt.hub.adapted_path("gpt-tiny", corpus, 3, base=corpus, objective="masked") != own
    with pytest.raises(ValueError, match="objective"):
        bertgpt.adapted("gpt-tiny", corpus, steps=3, base=corpus, objective="electra")


def test_electra_is_trained_once_then_loaded_and_keyed_by_its_generator(corpus, monkeypatch):
    tiny = dict(n_layer=1, d_model=32, n_head=2, d_ff=64)
    first = bertgpt.electra(corpus, steps=2, changes=tiny, progress=False)
    assert isinstance(first.model, bertgpt.BERT) and first.info["step"] == 2
    assert first.info["train"]["mask_rate"] == bertgpt.hub.COURSE["electra-mini"]["train"]["mask_rate"]
    assert "rtd_accuracy" in first.info["history"]["val"][-1]

    def refuse(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(bertgpt.pretraining, "pretrain_electra", refuse)
    again = bertgpt.electra(corpus, steps=2, changes=tiny, progress=False)
    assert again.info["weights_sha256"] == first.info["weights_sha256"]
    with pytest.raises(AssertionError, match="trained again"):
        bertgpt.electra(corpus, steps=2, width=0.25, changes=tiny, progress=False)
    # the name goes the same route
    by_name = bertgpt.pretrained("electra-mini", corpus, changes={**tiny, "steps": 2})
    assert by_name.info["weights_sha256"] == first.info["weights_sha256"]
    with pytest.raises(ValueError, match="no snapshots"):
        bertgpt.pretrained("electra-mini", corpus, step=1)
