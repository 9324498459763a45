"""bertgpt: GPT-1 and BERT from one Transformer skeleton, pretrained and fine-tuned for real.

The package behind the course "The 2018 pretraining paradigm — GPT-1 against BERT"::

    import bertgpt
    gpt = bertgpt.pretrained("gpt-mini")            # trained once, then cached
    bert = bertgpt.pretrained("bert-mini")
    bertgpt.count_parameters(bertgpt.build(bertgpt.model_config("bert-base")))
"""

from .checkpoint import Checkpoint, CheckpointError, load, save
from .config import PRESETS, ModelConfig, TrainConfig, apply_overrides, model_config, train_config
from .corpus import Corpus, Document, load_corpus
from .hub import pretrained
from .model import BERT, GPT, Backbone, KVCache, build, count_parameters, parameter_breakdown
from .pretraining import IGNORE, mask_tokens, nsp_pairs, pretrain
from .tokenizer import Tokenizer, tokenizer_for, train_tokenizer
from .trainer import History, default_device, evaluate, train

__version__ = "0.1.0"
