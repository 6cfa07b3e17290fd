"""The corpus of issue 38's study (compgen_jax/llm_data) as token documents for lm_train.

corpus.source = "llm_data": the data section is llm_data's data config, built (resumably) into
corpus.data_dir, whose tokenizer.model the ids come from. corpus.sources names what is trained
on: the background reads prose + python (every token counts); an expert one skill's training
problems with corpus.answer_only, so the loss counts the answer (build.examples' target) and not
the prompt (its context). Held out: corpus.num_held_out of those documents, drawn with
corpus.seed (the rest train).
"""

import os

import ml_collections
import numpy as np

from compgen_jax import checks
from compgen_jax.llm_data import build
from compgen_jax.llm_data import config as data_config
from compgen_jax.lm import loading
from compgen_jax.types import CheckpointError, ConfigError, DataError

# the background corpora an expert may replay (finetune.replay_sources)
REPLAY_SOURCES = ("prose", "python", "qa", "repeat", "formats")


def validate(cfg: ml_collections.ConfigDict) -> None:
  """The llm_data fields, before anything is built (ConfigError naming the field)."""
  d = cfg.corpus
  if not (isinstance(d.data_dir, str) and d.data_dir):
    raise ConfigError("corpus.data_dir", "must name the directory llm_data builds into (or "
                      "has built), e.g. --config.corpus.data_dir=/tmp/llm_data")
  try:
    data_config.validate(cfg.data)
  except ConfigError as e:
    raise ConfigError(f"data.{e.field}", str(e).split(": ", 1)[1]) from e
  if d.tokenizer:
    raise ConfigError("corpus.tokenizer", "must be empty: the ids come from data_dir's "
                      "tokenizer.model")
  checks.choices("corpus.sources", d.sources, build.SOURCES)
  checks.boolean("corpus.answer_only", d.answer_only)
  checks.integer("corpus.num_held_out", d.num_held_out, low=1)
  if d.answer_only and not cfg.init_from:
    raise ConfigError("init_from", "an answer-only corpus trains an expert, which starts at "
                      "the background's export (<background workdir>/export/seed_<s>)")
  if cfg.model.vocab_size != cfg.data.tokenizer.vocab_size:
    raise ConfigError("model.vocab_size", f"is {cfg.model.vocab_size}, the tokenizer the data "
                      f"section trains has {cfg.data.tokenizer.vocab_size} pieces")


def tokenizer_path(cfg: ml_collections.ConfigDict) -> str:
  return os.path.join(cfg.corpus.data_dir, build.TOKENIZER)


def tokenized(cfg: ml_collections.ConfigDict) -> tuple[list, list]:
  """(documents, loss masks) of corpus.sources, building whatever of data_dir is missing:
  context and target tokenised apart, so the mask ends exactly where the answer starts."""
  d = cfg.corpus
  build.ensure(cfg.data, d.data_dir)
  try:
    sp = loading.read_tokenizer(d.data_dir, cfg.model.vocab_size)
  except CheckpointError as e:  # hard_vocab_limit=False: a small corpus gives fewer pieces
    raise ConfigError("model.vocab_size", str(e)) from e
  docs, masks = [], []
  for source in d.sources:
    for context, target in build.examples(d.data_dir, source):
      c, t = sp.encode(context), sp.encode(target)
      docs.append(c + t)
      masks.append([0 if d.answer_only else 1] * len(c) + [1] * len(t))
  return docs, masks


def documents(cfg: ml_collections.ConfigDict) -> tuple[tuple, tuple]:
  """((documents, loss masks), (held-out documents, loss masks)): num_held_out documents
  drawn with corpus.seed are held out."""
  return held_out_split(cfg, *tokenized(cfg))


def source_documents(cfg: ml_collections.ConfigDict, source: str) -> tuple[tuple, tuple]:
  """documents() of one background source alone, every token counting, with
  finetune.held_out_per_source of them held out: the same draw for every config of the data
  (replay trains on the rest; drift is measured on them)."""
  one = ml_collections.ConfigDict(cfg.to_dict())
  one.corpus.update(sources=(source,), answer_only=False,
                    num_held_out=cfg.finetune.held_out_per_source)
  return documents(one)


def replay_documents(cfg: ml_collections.ConfigDict) -> tuple[list, list]:
  """(documents, loss masks) an expert replays (finetune.replay_sources): each source's
  training part, so every source's held-out documents stay unseen by the expert."""
  docs, masks = [], []
  for source in cfg.finetune.replay_sources:
    (d, m), _ = source_documents(cfg, source)
    docs += d
    masks += m
  return docs, masks


def held_out_split(cfg: ml_collections.ConfigDict, docs: list, masks: list
                   ) -> tuple[tuple, tuple]:
  """(train, held out) of tokenised documents: num_held_out of them drawn with corpus.seed."""
  n = cfg.corpus.num_held_out
  if n >= len(docs):
    raise DataError(f"corpus.num_held_out {n} leaves none of the {len(docs)} documents of "
                    f"{', '.join(cfg.corpus.sources)} to train on")
  held = set(np.random.default_rng(cfg.corpus.seed).permutation(len(docs))[:n].tolist())
  part = lambda keep: ([x for i, x in enumerate(docs) if (i in held) == keep],  # noqa: E731
                       [m for i, m in enumerate(masks) if (i in held) == keep])
  return part(False), part(True)
