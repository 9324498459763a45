"""Training speed of lstm-mini against gpt-mini: the budget that gives the LSTM gpt-mini's wall time.

GPT-1's ablation replaced the Transformer by an LSTM; chapter 3 repeats it at mini size for equal
wall time, so lstm-mini's number of updates (``bertgpt.hub.COURSE["lstm-mini"]``) follows from the ratio
of the two models' training speeds, measured here: same batches (16 x 128 tokens), same precision, one
thread.

    python bench/lstm_speed.py [--steps 20] [--threads 1]

Prints one JSON line: tokens per second of each, their ratio, and the LSTM updates that match
gpt-mini's wall time.
"""

import argparse
import dataclasses
import json

import torch

import bertgpt
from bertgpt.pretraining import lm_training_speed, token_stream


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    corpus = bertgpt.load_corpus()
    tok = bertgpt.pretrained("gpt-mini", progress=False).tokenizer
    stream = token_stream(tok, corpus.train)
    (gpt_cfg, gpt_train), (lstm_cfg, _) = map(bertgpt.hub.pretrained_configs, ("gpt-mini", "lstm-mini"))
    gpt = lm_training_speed(dataclasses.replace(gpt_cfg, vocab_size=tok.vocab_size), stream, args.steps)
    lstm = lm_training_speed(dataclasses.replace(lstm_cfg, vocab_size=tok.vocab_size), stream, args.steps)
    print(json.dumps(dict(threads=args.threads, gpt_tokens_per_second=round(gpt),
                          lstm_tokens_per_second=round(lstm), ratio=round(lstm / gpt, 3),
                          lstm_updates_for_equal_time=round(gpt_train.steps * lstm / gpt))))


if __name__ == "__main__":
    main()
