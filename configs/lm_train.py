"""Training small Gemma-2 language models through the training engine (compgen_jax/lm_train).

  from compgen_jax.lm_train import experiment
  experiment.train(get_config("quick"), "/tmp/lm_quick")   # -> /tmp/lm_quick/export/seed_<s>/

Every seed is one run of one program (vmapped, or one after another on a CPU: the engine's
"auto"); each is exported as a Hugging Face Gemma-2 directory that gemma2.load (the llm
preset's loader) reads back. A fine-tune starts every run from an exported model:
--config.init_from=/tmp/lm_quick/export/seed_0 (the paper's relation: experts start at the
background's weights), and a corpus with a loss_mask on each line trains on answers only.

The corpus: `synthetic` (arithmetic progressions of token ids: tests and timing), `jsonl`
(one document a line, {"tokens": [ids], "loss_mask": [0/1]}; corpus.tokenizer the
tokenizer.model the ids come from, copied into every export) or `llm_data` (issue 38's study
data: the `data` section is llm_data's data config, built into corpus.data_dir; corpus.sources
what is trained on; corpus.answer_only counts only the answers' tokens; lm_train/llm_corpus.py).
A pipeline that tokenises its own documents passes packed rows to experiment.train(...,
corpus=...) instead. On llm_data, --config.evals.copying=True measures in-context copying of
held-out repeat lines at each evaluation (eval/copy_second, eval/copy_first: what
benchmarks/copying.py prints for the export of that step), and
--config.evals.stop_copying=0.9 ends training at the first evaluation whose second-copy
accuracy reaches 0.9 (exported from that step; train.num_steps is then a cap).

The study's presets, <size>_background and <size>_expert_<skill> (size test, quick or cpu;
skill arith, funcs or strings): the background trains on prose + python, an expert fine-tunes
from the background's export on one skill's training problems, loss on the answers only:

  python experiments/train.py --config=configs/lm_train.py:quick_background \
    --config.corpus.data_dir=/tmp/llm_data --workdir=/tmp/lm_background
  python experiments/train.py --config=configs/lm_train.py:quick_expert_arith \
    --config.corpus.data_dir=/tmp/llm_data \
    --config.init_from=/tmp/lm_background/export/seed_0 --workdir=/tmp/lm_arith
  python experiments/report.py --dir=/tmp/lm_arith

Presets (model.vocab_size is the tokenizer's; the sizes below at 512 / 4096): test (31k
parameters, seconds: the tests), quick (0.6M / 0.9M parameters, 400 steps of 16 x 128 tokens:
about 3 min on an idle 2-core CPU), cpu (3.4M / 4.1M parameters, 2000 steps of 16 x 256
tokens: about an hour). docs/lm_train.md has the measured tokens/s per size.
"""

import ml_collections

from compgen_jax.llm_data import config as data_config
from compgen_jax.lm_train import model, recipes
from compgen_jax.training.config import train_config

SIZES = ("test", "quick", "cpu")
SKILLS = ("arith", "funcs", "strings")  # an expert's skill (llm_data's training problems)
ROLES = ("background",) + tuple(f"expert_{s}" for s in SKILLS)
PRESETS = SIZES + tuple(f"{size}_{role}" for size in SIZES for role in ROLES)


def base() -> ml_collections.ConfigDict:
  cfg = ml_collections.ConfigDict()
  cfg.app = "lm_train"  # apps.APPS: what experiments/train.py runs
  cfg.seed = 0
  cfg.num_seeds = 1
  cfg.model = model.default_config()
  # seq_len: tokens per packed row; the synthetic fields: documents drawn from corpus.seed (the
  # held-out ones from seed + 1), min_len..max_len ids each.
  cfg.corpus = ml_collections.ConfigDict(dict(
      source="synthetic", seq_len=128, add_bos=True, path="", held_out_path="", tokenizer="",
      seed=0, num_documents=2000, num_held_out=100, min_len=8, max_len=64,
      data_dir="", sources=("prose", "python"), answer_only=False))
  # llm_data's data config (source llm_data only): the corpora, skills and tokenizer
  cfg.data = data_config.data_config("cpu")
  cfg.init_from = ""  # an exported Gemma-2 directory every run starts from (fine-tuning)
  # AdamW (training/optim.py; decay on matrices and the embedding, not the norms) after
  # global-norm clipping at grad_clip (0: none).
  cfg.optim = ml_collections.ConfigDict(dict(
      learning_rate=1e-3, weight_decay=0.1, b1=0.9, b2=0.95, grad_clip=1.0,
      schedule="warmup_cosine", warmup_steps=100, end_factor=0.1))
  cfg.train = train_config(num_steps=2000, batch_size=16, chunk_size=100, log_every=50,
                           checkpoint_every=500, max_checkpoints=2)
  # held-out loss every `every` steps (and at the end); copying: in-context copying of the
  # held-out repeat documents with it (llm_data corpora; lm_train/copying.py); stop_copying:
  # training ends at the first evaluation whose second-copy accuracy reaches it (0: never;
  # num_steps is then a cap)
  cfg.evals = ml_collections.ConfigDict(dict(every=500, copying=False, stop_copying=0.0))
  cfg.export = ml_collections.ConfigDict(dict(enabled=True))  # <workdir>/export/seed_<s>/
  # how a fine-tune may move from its start (lm_train/recipes.py): replay of the background's
  # corpus, a KL penalty on it, low-rank adapters, decay toward the start; all off = full
  cfg.finetune = recipes.default_config()
  return cfg


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
  """The named preset: a size (test, quick, cpu: the synthetic corpus) or <size>_<role>."""
  if preset not in PRESETS:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  size, _, role = preset.partition("_")
  cfg = sized(size)
  if role:
    study(cfg, size, role)
  cfg.lock()
  return cfg


def study(cfg: ml_collections.ConfigDict, size: str, role: str) -> None:
  """Issue 38's corpus: the background on prose + python, an expert on one skill's answers
  (fine-tuned from the background: a lower learning rate, a quarter of the steps)."""
  cfg.data = data_config.data_config("tiny" if size == "test" else "cpu")
  cfg.model.vocab_size = cfg.data.tokenizer.vocab_size
  cfg.corpus.update(source="llm_data", num_held_out=10 if size == "test" else 200)
  if size == "test":
    cfg.num_seeds = 1
    cfg.train.update(num_steps=40, chunk_size=20, checkpoint_every=20)
    cfg.evals.every = 20
    cfg.finetune.held_out_per_source = 3  # the tiny data's 8 prose documents
  if role.startswith("expert_"):
    cfg.corpus.update(sources=(role.removeprefix("expert_"),), answer_only=True)
    cfg.optim.update(learning_rate=cfg.optim.learning_rate / 3,
                     warmup_steps=max(1, cfg.optim.warmup_steps // 4))
    steps = cfg.train.num_steps // 4 if size != "test" else cfg.train.num_steps
    cfg.train.update(num_steps=steps, checkpoint_every=min(cfg.train.checkpoint_every, steps))
    cfg.evals.every = min(cfg.evals.every, steps)


def sized(size: str) -> ml_collections.ConfigDict:
  """The model, corpus lengths and training length of a size (the synthetic corpus)."""
  cfg = base()
  if size == "test":
    cfg.num_seeds = 2
    # vocab_size: the tests' tokenizer (byte fallback: 256 byte pieces + 4 special + merges)
    cfg.model.update(vocab_size=400, width=32, num_layers=2, num_heads=2, num_kv_heads=1,
                     head_dim=16, mlp_dim=64, sliding_window=8)
    cfg.corpus.update(seq_len=32, num_documents=2000, num_held_out=50, min_len=4, max_len=24)
    cfg.optim.update(learning_rate=1e-2, warmup_steps=5)
    cfg.train.update(num_steps=200, batch_size=8, chunk_size=20, log_every=10,
                     checkpoint_every=100, progress=False)
    cfg.evals.every = 100
  elif size == "quick":
    cfg.model.update(width=96, num_layers=4, num_heads=4, num_kv_heads=2, head_dim=24,
                     mlp_dim=384)
    cfg.corpus.seq_len = 128
    cfg.optim.warmup_steps = 40
    cfg.train.update(num_steps=400, checkpoint_every=200)
    cfg.evals.every = 200
  elif size == "cpu":
    cfg.model.update(width=192, num_layers=6, num_heads=4, num_kv_heads=2, head_dim=48,
                     mlp_dim=768)
    cfg.corpus.seq_len = 256
    cfg.train.update(num_steps=2000, batch_size=16, chunk_size=100, checkpoint_every=500)
  return cfg
