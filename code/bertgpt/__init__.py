"""bertgpt: GPT-1 and BERT from one Transformer skeleton, pretrained and fine-tuned for real.

The package behind the course "The 2018 pretraining paradigm — GPT-1 against BERT"::

    import bertgpt
    gpt = bertgpt.pretrained("gpt-mini")            # the course models: shipped, loaded in seconds
    bert = bertgpt.pretrained("bert-mini")
    clf, result = bertgpt.finetune(bert, bertgpt.load_task("era").subsample(300))
    bertgpt.count_parameters(bertgpt.build(bertgpt.model_config("bert-base")))
"""

from .checkpoint import Checkpoint, CheckpointError, load, save
from .config import (
                     PRESETS,
                     FinetuneConfig,
                     ModelConfig,
                     PretrainConfig,
                     TrainConfig,
                     apply_overrides,
                     model_config,
                     train_config,
)
from .corpus import Corpus, Document, load_corpus, shuffle_sentences, subsample
from .device import default_device, device_of, eval_mode
from .evaluate import cloze_accuracy, masked_token_accuracy, perplexity
from .exercises import check
from .finetune import Classifier, finetune, label_curve, load_classifier, predict, save_classifier
from .generate import Sampling, fill_mask, generate, generate_by_masking, top_k_filter, top_p_filter
from .hub import adapted, course_models, electra, pretrained, untrained
from .inputs import IGNORE
from .model import (
                     BERT,
                     GPT,
                     Backbone,
                     KVCache,
                     Output,
                     build,
                     count_parameters,
                     init_weights,
                     parameter_breakdown,
)
from .pretraining import continue_pretraining, mask_tokens, nsp_pairs, pretrain, resume
from .probes import probe
from .scoring import log_likelihood, pseudo_log_likelihood
from .senses import contextual_vectors, load_senses, nearest_centroid_accuracy
from .stats import accuracy, confusion_matrix, f1
from .tasks import TASKS, Example, Task, load_task
from .tokenizer import Tokenizer, coverage, tokenizer_for, train_tokenizer
from .trainer import History, KeepBest, train, validate, validation
from .wordvec import WordVecConfig, WordVectors, train_word_vectors

__version__ = "0.1.0"
