import dataclasses
import json
import os
import subprocess
import sys

import pytest

import bertgpt
from bertgpt.cli import main
from bertgpt.evaluate import accuracy
from bertgpt.finetune import load_classifier, predict
from bertgpt.pretraining import RunRecord
from bertgpt.tasks import load_task
from conftest import tiny
from test_checkpoint import DAMAGES, _damage


def _cli(*args, env_cache):
    return subprocess.run([sys.executable, "-m", "bertgpt", *args], capture_output=True, text=True,
                          env={**__import__("os").environ, "BERTGPT_CACHE": env_cache})


def test_cli_pretrain_prints_its_figures_as_json_and_writes_a_checkpoint(tmp_path):
    corpus = tmp_path / "texts"
    corpus.mkdir()
    for i in range(12):  # a corpus of the user's own: one address per file
        text = bertgpt.load_corpus().documents[i * 5].text
        (corpus / f"doc{i}.txt").write_text(text)
    out = _cli("pretrain", "--model", "bert", "--preset", "tiny", "--steps", "5", "--corpus", str(corpus),
               "--out", str(tmp_path / "ck"), "--set", "context=48", env_cache=str(tmp_path / "c"))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("train_loss", "val_loss", "steps", "params", "tokens_per_second", "checkpoint",
                "mlm_accuracy", "nsp_accuracy"):
        assert key in result
    assert result["steps"] == 5
    ck = bertgpt.load(result["checkpoint"])
    assert ck.model.config.context == 48
    # the same typed record the cache writes (tests/test_hub.py), for a run that is no named model
    record = RunRecord(**{f.name: ck.info[f.name] for f in dataclasses.fields(RunRecord)})
    assert (record.name, record.step, record.tokenizer_kind, record.corpus) == ("", 5, "wordpiece", "texts")
    assert record.metrics["steps"] == 5 and record.history["val"] and record.train["steps"] == 5


def test_cli_rejects_bad_input_with_a_message_not_a_traceback(tmp_path):
    out = _cli("pretrain", "--model", "gpt", "--preset", "tiny", "--out", str(tmp_path / "x"),
               "--set", "n_layers=3", env_cache=str(tmp_path / "c"))
    assert out.returncode == 2 and "unknown field 'n_layers'" in out.stderr and "Traceback" not in out.stderr
    out = _cli("pretrain", "--model", "gpt", "--preset", "tiny", "--out", str(tmp_path / "x"),
               "--corpus", str(tmp_path / "nowhere"), env_cache=str(tmp_path / "c"))
    assert out.returncode == 2 and "does not exist" in out.stderr


def test_cli_bench_reports_speed_and_the_shape_it_measured():
    out = subprocess.run([sys.executable, "-m", "bertgpt", "bench", "--model", "gpt", "--preset", "tiny",
                          "--steps", "3", "--device", "cpu"], capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["tokens_per_second"] > 0 and result["ms_per_step"] > 0 and result["peak_memory_mb"] > 0
    assert (result["n_layer"], result["d_model"], result["context"], result["batch_size"]) == (2, 32, 32, 8)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, gpt, bert, wordpiece):
    root = tmp_path_factory.mktemp("ck")
    return (bertgpt.save(root / "gpt", gpt, wordpiece), bertgpt.save(root / "bert", bert, wordpiece))


def test_cli_generate_and_fill_print_json(checkpoints, capsys):
    gpt_dir, bert_dir = checkpoints
    main(["generate", "--checkpoint", str(gpt_dir), "--prompt", "the union", "--max-new-tokens", "6",
          "--top-k", "20", "--seed", "1"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["text"] and out["prompt_tokens"] == 3 and out["new_tokens"] == 6 and not out["truncated"]
    main(["fill", "--checkpoint", str(bert_dir), "--text", "the [MASK] of the [MASK]", "--top-k", "3"])
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(out["masks"]) == 2 and len(out["masks"][0]) == 3 and 0 < out["masks"][0][0]["probability"] < 1


def test_cli_refuses_the_wrong_family_with_a_message_not_a_traceback(checkpoints):
    gpt_dir, bert_dir = checkpoints
    cases = ((["generate", "--checkpoint", str(bert_dir), "--prompt", "the"], "a gpt model is needed"),
             (["fill", "--checkpoint", str(gpt_dir), "--text", "the [MASK]"], "a bert model is needed"),
             (["fill", "--checkpoint", "gpt-mini", "--text", "the [MASK]"], "a bert model is needed"))
    for args, message in cases:
        out = subprocess.run([sys.executable, "-m", "bertgpt", *args], capture_output=True, text=True,
                             env=os.environ)
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_cli_finetune_and_errors(gpt_ck, tmp_path, capsys):
    bertgpt.save(tmp_path / "gpt", gpt_ck.model, gpt_ck.tokenizer)
    csv = tmp_path / "toy.csv"
    splits = ["train"] * 8 + ["val", "test"] * 2
    csv.write_text("text,label,split\n" + "".join(f"word {i},{i % 2},{s}\n" for i, s in enumerate(splits)))
    main(["finetune", "--checkpoint", str(tmp_path / "gpt"), "--task", str(csv), "--out",
          str(tmp_path / "clf"), "--set", "epochs=1", "--device", "cpu"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"val_accuracy", "test_accuracy", "majority_baseline", "epochs_run"} <= set(result)
    test = load_task(csv).test
    assert accuracy([e.label for e in test], predict(load_classifier(tmp_path / "clf"), test)) == \
        result["test_accuracy"]
    with pytest.raises(SystemExit) as exit:
        main(["probe", "--checkpoint", str(tmp_path / "gpt"), "--task", "nonsense"])
    assert exit.value.code == 2 and "error: unknown task" in capsys.readouterr().err


def _toy_csv(path):
    splits = ["train"] * 8 + ["val", "test"] * 2
    path.write_text("text,label,split\n" + "".join(f"word {i},{i % 2},{s}\n" for i, s in enumerate(splits)))
    return path


def test_cli_finetune_from_scratch_by_name_never_pretrains(tmp_path):
    task = str(_toy_csv(tmp_path / "t.csv"))
    out = _cli("finetune", "--checkpoint", "bert-tiny", "--from-scratch", "--task", task,
               "--out", str(tmp_path / "clf"), "--set", "epochs=1", env_cache=str(tmp_path / "c"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["from_scratch"] is True
    assert not (tmp_path / "c" / "models").exists()  # no pretrained model was trained or cached


@pytest.mark.parametrize("how", DAMAGES)
def test_cli_reports_a_malformed_checkpoint_in_one_line(tmp_path, gpt, wordpiece, how):
    _damage(bertgpt.save(tmp_path / "ck", gpt, wordpiece), how)
    out = _cli("generate", "--checkpoint", str(tmp_path / "ck"), env_cache=str(tmp_path / "c"))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("error: ")


def test_cli_pretrain_resume_continues_an_interrupted_run(tmp_path, corpus):
    bertgpt.save(tmp_path / "done", bertgpt.build(bertgpt.model_config("tiny", "gpt")),
                 bertgpt.tokenizer_for(corpus, "bpe", 512))
    out = _cli("pretrain", "--resume", str(tmp_path / "done"), env_cache=str(tmp_path / "c"))
    assert out.returncode == 2 and "nothing to resume" in out.stderr


@pytest.fixture(scope="module")
def address_gpt(tmp_path_factory, corpus):
    """A tiny GPT pretrained for a few updates on the addresses, saved as the CLI saves one."""
    out = tmp_path_factory.mktemp("init") / "gpt"
    main(["pretrain", "--model", "gpt", "--preset", "tiny", "--steps", "6", "--out", str(out),
          "--corpus", _folder(tmp_path_factory.mktemp("sotu"), corpus.documents), "--device", "cpu"])
    return out


def _folder(path, documents):
    for i, d in enumerate(documents):
        (path / f"{i:03d}.txt").write_text(d.text)
    return str(path)


def test_cli_pretrain_init_continues_a_checkpoint_on_a_folder_and_finetune_accepts_it(
        address_gpt, bible, tmp_path, capsys):
    capsys.readouterr()
    main(["pretrain", "--init", str(address_gpt), "--corpus", _folder(tmp_path, bible.documents),
          "--steps", "4", "--set", "lr=1e-3", "--out", str(tmp_path / "adapted"), "--device", "cpu"])
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert "tokenizer on" in captured.err and "tokens per word" in captured.err  # before training
    assert result["steps"] == 4 and result["init"] == str(address_gpt) and result["coverage"]["words"] > 0
    adapted, original = bertgpt.load(tmp_path / "adapted"), bertgpt.load(address_gpt)
    assert adapted.tokenizer.hf.to_str() == original.tokenizer.hf.to_str()
    assert adapted.config == original.config and adapted.info["train"]["lr"] == 1e-3
    main(["finetune", "--checkpoint", str(tmp_path / "adapted"), "--task", str(_toy_csv(tmp_path / "t.csv")),
          "--out", str(tmp_path / "clf"), "--set", "epochs=1", "--device", "cpu"])
    assert "test_accuracy" in json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize("args, message", [
    (["--resume", "X"], "not both"),
    (["--model", "bert"], "holds a gpt model, but a bert model is needed"),
    (["--preset", "mini"], "--preset: with --init the model and its tokenizer are the checkpoint's"),
    (["--set", "n_layer=3"], "--set n_layer=3: with --init"),
    (["--tokenizer", "char"], "--tokenizer: with --init"),
    (["--corpus", "nowhere"], "does not exist"),
    (["--corpus", "EMPTY"], "holds no non-empty .txt file"),
])
def test_cli_pretrain_init_refuses_what_contradicts_the_checkpoint(address_gpt, tmp_path, capsys, args,
                                                                   message):
    (tmp_path / "EMPTY").mkdir()
    (tmp_path / "EMPTY" / "blank.txt").write_text("  \n")
    args = [str(tmp_path / a) if a == "EMPTY" else a for a in args]
    with pytest.raises(SystemExit) as exit:
        main(["pretrain", "--init", str(address_gpt), "--out", str(tmp_path / "o"), "--steps", "2", *args])
    assert exit.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_cli_pretrain_init_refuses_a_directory_that_is_not_a_checkpoint(tmp_path, corpus, capsys):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("not a model")
    with pytest.raises(SystemExit) as exit:
        main(["pretrain", "--init", str(tmp_path / "notes"), "--out", str(tmp_path / "o"),
              "--corpus", _folder(tmp_path, corpus.documents[:5])])
    assert exit.value.code == 2 and "is incomplete" in capsys.readouterr().err


def test_cli_pretrain_init_by_name_compares_the_coverage_with_the_addresses(bible, tmp_path, capsys,
                                                                            monkeypatch):
    monkeypatch.setenv("BERTGPT_CACHE", str(tmp_path / "cache"))  # empty: nothing pretrained yet
    with pytest.raises(SystemExit):  # the other family is refused before anything is pretrained
        main(["pretrain", "--init", "gpt-tiny", "--model", "bert", "--out", str(tmp_path / "o")])
    assert "a bert model is needed" in capsys.readouterr().err
    assert not (bertgpt.tokenizer.cache_dir() / "models").exists()
    main(["pretrain", "--init", "gpt-tiny", "--corpus", _folder(tmp_path, bible.documents[:12]),
          "--steps", "2", "--out", str(tmp_path / "o"), "--device", "cpu"])
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["init"] == "gpt-tiny" and result["coverage"]["reference"]["corpus"] == "sotu"
    assert bertgpt.load(tmp_path / "o", family="gpt").info["init"] == "gpt-tiny"


def test_cli_generate_takes_lstm_mini_a_gpt_family_language_model(gpt_ck, capsys, monkeypatch):
    import bertgpt.cli as cli
    from bertgpt.hub import family_of

    asked = []

    def lstm_mini(name, **kwargs):  # stands in for the cached lstm-mini, so nothing pretrains here
        asked.append(name)
        return gpt_ck

    monkeypatch.setattr(cli, "pretrained", lstm_mini)
    main(["generate", "--checkpoint", "lstm-mini", "--prompt", "the union", "--max-new-tokens", "3"])
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["new_tokens"] == 3
    assert asked == ["lstm-mini"] and family_of("lstm-mini") == "gpt"
    with pytest.raises(SystemExit):
        main(["fill", "--checkpoint", "lstm-mini", "--text", "the [MASK]"])
    assert "'lstm-mini' is a gpt model, but a bert model is needed" in capsys.readouterr().err


# --- Every command with every family it takes, on tiny models (the refusals are tested above) -------

@pytest.fixture(scope="module")
def family_checkpoints(tmp_path_factory, bpe, wordpiece):
    """A tiny saved checkpoint of each family: GPT, BERT (with the context of 128 that the held-out
    cloze texts need) and GPT-1's LSTM ablation (one layer, as lstm-mini), random weights."""
    root = tmp_path_factory.mktemp("families")
    models = dict(gpt=(tiny("gpt", vocab_size=bpe.vocab_size), bpe),
                  bert=(tiny("bert", vocab_size=wordpiece.vocab_size, context=128), wordpiece),
                  lstm=(tiny("gpt", arch="lstm", n_layer=1, vocab_size=bpe.vocab_size), bpe))
    return {family: str(bertgpt.save(root / family, model, tok)) for family, (model, tok) in models.items()}


def _run(args, capsys) -> dict:
    main(args)
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize("family", ["gpt", "bert", "lstm"])
def test_cli_every_checkpoint_command_takes_every_family_it_accepts(family, family_checkpoints, tmp_path,
                                                                   capsys):
    ck, task = family_checkpoints[family], str(_toy_csv(tmp_path / "t.csv"))
    n_layer = bertgpt.load(ck).config.n_layer
    result = _run(["finetune", "--checkpoint", ck, "--task", task, "--out", str(tmp_path / "clf"),
                   "--set", "epochs=1", "--device", "cpu"], capsys)
    assert result["epochs_run"] == 1 and 0 <= result["test_accuracy"] <= 1
    result = _run(["probe", "--checkpoint", ck, "--task", task], capsys)
    assert sorted(result["accuracy"]) == [str(i) for i in range(n_layer + 1)]
    result = _run(["evaluate", "--checkpoint", ck], capsys)
    assert result["family"] == ("bert" if family == "bert" else "gpt")
    assert {"mlm_accuracy", "nsp_accuracy", "content_top5"} <= set(result) if family == "bert" else \
        result["test_loss"] > 0
    if family == "bert":
        result = _run(["fill", "--checkpoint", ck, "--text", "the [MASK] of it", "--top-k", "2"], capsys)
        assert len(result["masks"]) == 1 and len(result["masks"][0]) == 2
    else:
        result = _run(["generate", "--checkpoint", ck, "--prompt", "the union", "--max-new-tokens", "3"],
                      capsys)
        assert result["new_tokens"] == 3


@pytest.mark.parametrize("family, args", [("bert", ["--model", "bert"]),
                                          ("lstm", ["--model", "gpt", "--set", "arch=lstm"])])
def test_cli_bench_measures_bert_and_the_lstm_too(family, args, capsys):
    result = _run(["bench", *args, "--preset", "tiny", "--steps", "3", "--device", "cpu"], capsys)
    assert result["tokens_per_second"] > 0 and result["final_loss"] > 0
    assert result["family"] == ("bert" if family == "bert" else "gpt")


def test_cli_pretrain_trains_the_lstm_with_gpts_objective(corpus, tmp_path, capsys):
    result = _run(["pretrain", "--model", "gpt", "--set", "arch=lstm", "--preset", "tiny", "--steps", "3",
                   "--corpus", _folder(tmp_path, corpus.documents[:12]), "--out", str(tmp_path / "lstm"),
                   "--device", "cpu"], capsys)
    assert result["steps"] == 3 and result["val_loss"] > 0
    assert isinstance(bertgpt.load(tmp_path / "lstm").model, bertgpt.model.LSTMLM)


def test_cli_pretrain_never_overwrites_a_finished_run_in_its_out_directory(tmp_path, corpus):
    (tmp_path / "texts").mkdir()
    args = ("pretrain", "--model", "gpt", "--preset", "tiny", "--steps", "4", "--device", "cpu",
            "--corpus", _folder(tmp_path / "texts", corpus.documents[:12]), "--out", str(tmp_path / "done"))
    main(list(args))
    before = bertgpt.load(tmp_path / "done").info["weights_sha256"]
    out = _cli(*args, env_cache=str(tmp_path / "c"))
    assert out.returncode == 2 and "holds a finished model" in out.stderr
    assert bertgpt.load(tmp_path / "done").info["weights_sha256"] == before  # kept as it was
