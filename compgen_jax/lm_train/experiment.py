"""One program of configs/lm_train.py: validate, pack the corpus, train every seed through the
engine (resuming), export each trained run as a Hugging Face Gemma-2 directory that
`gemma2.load` (the llm preset's loader) reads back."""

import os

import jax
import ml_collections
import numpy as np

from compgen_jax import checks
from compgen_jax import workdir as workdir_lib
from compgen_jax.lm import gemma2, hf_export, loading
from compgen_jax.lm_train import copying, data, family, llm_corpus, recipes
from compgen_jax.lm_train import model as model_lib
from compgen_jax.training import loop, optim
from compgen_jax.training import passes as engine_passes
from compgen_jax.training.config import validate_train
from compgen_jax.types import CheckpointError, ConfigError, DataError, PyTree

SOURCES = ("synthetic", "jsonl", "llm_data")  # llm_data: llm_corpus.py
EXPORT_DIR = "export"  # <workdir>/export/seed_<s>/: config.json, model.safetensors, tokenizer


def validate(cfg: ml_collections.ConfigDict, start_written: bool = True) -> None:
  """Every check before anything compiles or is written; ConfigError naming the field.
  start_written=False: init_from names an export a pipeline writes before this run starts (what
  it holds is checked then, not now)."""
  checks.integer("seed", cfg.seed, low=0)
  checks.integer("num_seeds", cfg.num_seeds, low=1)
  model_lib.validate(cfg.model)
  d = cfg.corpus
  checks.choice("corpus.source", d.source, SOURCES)
  checks.integer("corpus.seq_len", d.seq_len, low=2)
  checks.boolean("corpus.add_bos", d.add_bos)
  if d.source == "synthetic":
    for name in ("num_documents", "num_held_out", "min_len"):
      checks.integer(f"corpus.{name}", d[name], low=1)
    checks.integer("corpus.max_len", d.max_len, low=d.min_len)
  elif d.source == "llm_data":
    llm_corpus.validate(cfg)
  else:
    for name in ("path", "held_out_path"):
      if not (isinstance(d[name], str) and os.path.isfile(d[name])):
        raise ConfigError(f"corpus.{name}", f"must name a jsonl file, got {d[name]!r}")
  if d.tokenizer:  # copied into every export, where gemma2.load_tokenizer looks for it
    if os.path.basename(d.tokenizer) != "tokenizer.model":
      raise ConfigError("corpus.tokenizer", f"must be a tokenizer.model, got {d.tokenizer!r}")
    try:
      loading.read_tokenizer(os.path.dirname(d.tokenizer) or ".", cfg.model.vocab_size)
    except CheckpointError as e:
      raise ConfigError("corpus.tokenizer", str(e)) from e
  if cfg.init_from and start_written:
    found = _config_of(cfg.init_from)
    if found != model_lib.gemma_config(cfg.model):
      raise ConfigError("init_from", f"{cfg.init_from!r} holds a model {found}, the model "
                        f"section says {model_lib.gemma_config(cfg.model)}")
  checks.positive("optim.learning_rate", cfg.optim.learning_rate)
  checks.number("optim.weight_decay", cfg.optim.weight_decay, 0)
  checks.number("optim.grad_clip", cfg.optim.grad_clip, 0)
  validate_train(cfg.train)
  optim.validate_schedule(cfg.optim, cfg.train.num_steps)
  checks.integer("evals.every", cfg.evals.every, low=1, multiple_of=cfg.train.chunk_size)
  checks.boolean("evals.copying", cfg.evals.copying)
  checks.number("evals.stop_copying", cfg.evals.stop_copying, 0, 1)
  if cfg.evals.copying and d.source != "llm_data":
    raise ConfigError("evals.copying", "needs corpus.source llm_data (its repeat lines), got "
                      f"{d.source!r}")
  if cfg.evals.stop_copying and not cfg.evals.copying:
    raise ConfigError("evals.stop_copying", "needs evals.copying=True (what it stops on)")
  checks.boolean("export.enabled", cfg.export.enabled)
  recipes.validate(cfg, llm_corpus.REPLAY_SOURCES)


def _config_of(directory: str) -> gemma2.Gemma2Config:
  try:
    hf, path = loading.read_config(directory)
    return gemma2.config_from_hf(hf, path)
  except CheckpointError as e:
    raise ConfigError("init_from", str(e)) from e


def documents(cfg: ml_collections.ConfigDict) -> tuple[tuple, tuple]:
  """((documents, loss masks), (held-out documents, loss masks)) of the corpus section."""
  d = cfg.corpus
  if d.source == "synthetic":  # the held-out documents from the next data seed
    draw = lambda seed, n: (data.synthetic_documents(  # noqa: E731
        seed, n, cfg.model.vocab_size, d.min_len, d.max_len), None)
    return draw(d.seed, d.num_documents), draw(d.seed + 1, d.num_held_out)
  if d.source == "llm_data":
    return llm_corpus.documents(cfg)
  return (data.read_jsonl(d.path, cfg.model.vocab_size),
          data.read_jsonl(d.held_out_path, cfg.model.vocab_size))


def packed(cfg: ml_collections.ConfigDict) -> tuple[data.Packed, data.Packed]:
  (docs, masks), (held_docs, held_masks) = documents(cfg)
  pack = lambda x, m: data.pack(x, cfg.corpus.seq_len, m, cfg.corpus.add_bos)  # noqa: E731
  return pack(docs, masks), pack(held_docs, held_masks)


def tokenizer_path(cfg: ml_collections.ConfigDict) -> str | None:
  """The tokenizer.model the corpus's ids come from (copied into every export), if any."""
  if cfg.corpus.source == "llm_data":
    return llm_corpus.tokenizer_path(cfg)
  return cfg.corpus.tokenizer or None


def start_params(cfg: ml_collections.ConfigDict) -> PyTree | None:
  """The parameters every run starts from: None (the training init) or init_from's."""
  if not cfg.init_from:
    return None
  return gemma2.load(cfg.init_from, dtype=np.float32)[1]


def train(cfg: ml_collections.ConfigDict, workdir: str, stop_after: int | None = None,
          corpus: tuple[data.Packed, data.Packed] | None = None) -> list[dict]:
  """Trains every seed of `cfg` in `workdir` (resuming), then exports each run; `corpus`
  (train, held-out packed rows) replaces the corpus section's data, e.g. a pipeline's own
  tokenised documents. Returns the last step's rows."""
  validate(cfg)
  train_rows, held_rows = packed(cfg) if corpus is None else corpus
  for name, rows in (("train", train_rows), ("held-out", held_rows)):
    if rows.tokens_NxL.shape[1] != cfg.corpus.seq_len or rows.tokens_NxL.max() >= (
        cfg.model.vocab_size):
      raise DataError(f"{name} rows {rows.tokens_NxL.shape} (ids up to "
                      f"{rows.tokens_NxL.max()}) are not corpus.seq_len {cfg.corpus.seq_len} "
                      f"wide in a vocabulary of {cfg.model.vocab_size}")
  fam = family.family(cfg, train_rows, held_rows, start_params(cfg), copying_documents(cfg),
                      replay_rows(cfg))
  final = loop.run(fam, cfg, workdir, stop_after)
  # train.num_steps, stop_after's, or where training stopped early
  step = final[0]["step"] if final else 0
  if cfg.export.enabled and (step == cfg.train.num_steps or loop.stopped(
      fam, os.path.join(workdir, workdir_lib.METRICS_FILE), step)):
    export(cfg, workdir, step)
  return final


def replay_rows(cfg: ml_collections.ConfigDict) -> data.Packed | None:
  """The packed rows finetune.replay draws from (llm_corpus.replay_documents), else None."""
  if not recipes.replay_rows(cfg):
    return None
  docs, masks = llm_corpus.replay_documents(cfg)
  return data.pack(docs, cfg.corpus.seq_len, masks, cfg.corpus.add_bos)


def copying_documents(cfg: ml_collections.ConfigDict) -> tuple | None:
  """copying.score_masks of the held-out repeat documents when evals.copying, else None."""
  if not cfg.evals.copying:
    return None
  c = model_lib.gemma_config(cfg.model)
  sp = loading.read_tokenizer(cfg.corpus.data_dir, cfg.model.vocab_size)
  return copying.score_masks(copying.held_out_documents(cfg.corpus.data_dir, sp, c.bos_id),
                             c.pad_id)


def trained_params(cfg: ml_collections.ConfigDict, workdir: str,
                   step: int | None = None) -> PyTree:
  """Every run's parameters [num_seeds, ...] at the checkpoint of `step` (default
  train.num_steps; an early stop's: train returns it), a CheckpointError naming the steps there
  when there is none."""
  ckpt_dir = os.path.join(workdir, workdir_lib.CHECKPOINT_DIR)
  step, = engine_passes.select_steps(ckpt_dir, step or cfg.train.num_steps, every=False)
  # a fine-tuned run's state has the fresh one's shapes (an adapted one: its adapters')
  program = family.program_config(cfg)
  init = family.init_lora(program) if cfg.finetune.lora_rank else family.init_fresh(program)
  trained = loop.restore(workdir, init, (family.run_keys(cfg),), step)[1].params
  if not cfg.finetune.lora_rank:
    return trained
  start = start_params(cfg)
  return jax.vmap(lambda lora: recipes.merge(start, lora, cfg.finetune))(trained)


def export_dir(workdir: str, seed: int) -> str:
  return os.path.join(workdir, EXPORT_DIR, f"seed_{seed}")


def export(cfg: ml_collections.ConfigDict, workdir: str, step: int | None = None) -> list[str]:
  """Each run's parameters at `step` (default: train.num_steps) as an HF Gemma-2 directory,
  with the corpus's tokenizer.model when it has one. Returns the directories."""
  params_R = trained_params(cfg, workdir, step)
  c = model_lib.gemma_config(cfg.model)
  out = []
  for s in range(cfg.num_seeds):
    out.append(export_dir(workdir, s))
    hf_export.write(out[-1], c, jax.tree.map(lambda a, s=s: np.asarray(a[s]), params_R),
                    tokenizer_path(cfg))
  return out
