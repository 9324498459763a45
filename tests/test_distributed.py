"""Two CPU processes under torchrun (gloo) reach the weights of one process with the same global batch:
GPT, and BERT with and without next-sentence prediction (without it, BERT has no NSP head, so every
parameter gets a gradient and DistributedDataParallel needs no search for unused ones).

Under torchrun each of N processes takes every N-th batch of the same seeded stream and DDP averages
their gradients, so an update sees the same N micro-batches that one process sees with
``accumulate`` N times larger. With dropout off, the two runs can differ only in the order of
float additions: the test allows 1e-5 (absolute) on every weight after 6 updates. Measured here, the
difference is 0 (gloo's sum of two halves rounds as accumulation does), while a run on half the
global batch ends 7.6e-3 away: a wrong shard or a missing average cannot pass.
"""

import json
import os
import socket
import subprocess
import sys

import pytest
from safetensors.torch import load_file

TOLERANCE = 1e-5
STEPS = 6


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pretrain(tmp_path, corpus_dir, out, *extra, nproc=None, model="gpt"):
    args = ["-m", "bertgpt", "pretrain", "--model", model, "--preset", "tiny", "--steps", str(STEPS),
            "--corpus", str(corpus_dir), "--out", str(out), "--set", "dropout=0", "--set", "eval_every=3",
            "--set", "eval_batches=1", "--device", "cpu", *extra]
    if nproc:
        args = ["-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--master_addr=127.0.0.1",
                f"--master_port={_free_port()}", *args]
    env = dict(os.environ, BERTGPT_CACHE=str(tmp_path / "cache"), BERTGPT_QUIET="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(p for p in [os.path.abspath("code"), os.environ.get("PYTHONPATH")]
                                          if p))
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory, corpus):
    folder = tmp_path_factory.mktemp("corpus")
    for i, doc in enumerate(corpus.documents[:6]):
        (folder / f"{i}.txt").write_text("\n\n".join(doc.paragraphs), encoding="utf-8")
    return folder


RUNS = {"gpt": ("gpt",), "bert": ("bert",), "bert without NSP": ("bert", "--set", "nsp=false")}


@pytest.mark.parametrize("run", RUNS)
def test_two_processes_reach_the_weights_of_one_with_the_same_global_batch(tmp_path, corpus_dir, run):
    model, *recipe = RUNS[run]
    lines = _pretrain(tmp_path, corpus_dir, tmp_path / "ddp", *recipe, nproc=2, model=model)
    assert len(lines) == 1  # only rank 0 reports
    report = json.loads(lines[0])
    assert report["processes"] == 2 and report["steps"] == STEPS
    _pretrain(tmp_path, corpus_dir, tmp_path / "one", *recipe, "--set", "accumulate=2", model=model)
    _pretrain(tmp_path, corpus_dir, tmp_path / "half", *recipe, model=model)  # half the global batch
    ddp, one, half = (load_file(tmp_path / name / "model.safetensors") for name in ("ddp", "one", "half"))
    assert ddp.keys() == one.keys()
    assert ("nsp_head.weight" in ddp) == (run == "bert")  # the head where the recipe trains it
    worst = max(float((ddp[k] - one[k]).abs().max()) for k in ddp)
    assert worst < TOLERANCE, f"largest weight difference {worst:.2e}"
    assert max(float((half[k] - one[k]).abs().max()) for k in one) > 100 * TOLERANCE  # the test can tell
