"""Letter-substitution logit-composition experiments (paper 2, toy experiment + checks).

  python experiments/train.py --config=configs/letters.py:quick --workdir=/tmp/letters_quick
  python experiments/train.py --config=configs/letters.py:paper --workdir=workdirs/letters \
      --config.num_seeds=5 --config.experiments="('substitution','baselines')"
  # k = 1..8 experts and every baseline at the authors' own setting (`make
  # reproduce-cpu-letters-k`; its estimated time: results/cpu/letters/notes.md)
  python experiments/train.py --config=configs/letters.py:authors --workdir=W \
      --config.experiments="('substitution','baselines','k_experts','k_baselines')"

Presets: `authors` (the authors' notebook: a GPT-2-like position-aligned transducer over the 27
symbols, learned positions, tied head, 10,000 AdamW steps at batch 1 and a constant 3e-4,
composed per position on one forward pass, GPT-2's initialisation; `--config.data.layout=aligned`
trains the same setting in the interleaved layout, composed by lockstep decoding), `paper` (the
paper's 2 layers / width 64 / 2 heads, 2000 training pairs; GPU-sized evaluation), `quick` (a
2-core CPU: minutes for all seven experiments; its measured times: results/cpu/NOTES.md), `tiny`
(seconds; tests).

`init`: `independent` (the authors' code: background, experts and every other from-scratch model
draw their own initial parameters) or `shared` (all from-scratch models of a seed start from
one draw; weight averaging and task arithmetic need this).

Lists are tuples; substitutions are 'X>Y' strings, e.g.
--config.compose.pairs="(('A>K','M>B'),)" or --config.finetune.regimes="('head','all')".
"""

import ml_collections

from compgen_jax.composition import spec
from compgen_jax.letters.registry import EXPERIMENTS

PRESETS = ("authors", "paper", "quick", "tiny")
# Experiments a preset runs only when named: k_baselines trains a joint model per k (k_max - 1
# more models than k_experts).
OPT_IN = ("k_baselines",)
# The authors' qualitative strings (their notebook, composing A>K with M>B).
AUTHORS_STRINGS = ("AMMA", "HELLO", "MAP", "GAMMA", "AAA MMM", "TEST AM")


def _train(num_steps, batch_size, chunk_size) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(dict(num_steps=num_steps, batch_size=batch_size,
                                        chunk_size=chunk_size))


def _optim(learning_rate, warmup_steps) -> ml_collections.ConfigDict:
  """AdamW, warmup then cosine decay to end_factor x learning_rate, global-norm clipping."""
  return ml_collections.ConfigDict(dict(
      learning_rate=learning_rate, warmup_steps=warmup_steps, weight_decay=0.01, grad_clip=1.0,
      end_factor=0.1))


def base() -> ml_collections.ConfigDict:
  cfg = ml_collections.ConfigDict()
  cfg.app = "letters"  # apps.APPS: what experiments/train.py runs
  cfg.preset = ""
  cfg.seed = 0
  cfg.num_seeds = 3
  cfg.init = "independent"  # independent (the authors' code) | shared (one init per seed)
  # a subset of compgen_jax/letters/registry.py's: all but the opt-in ones
  cfg.experiments = tuple(n for n in EXPERIMENTS if n not in OPT_IN)
  cfg.model = ml_collections.ConfigDict(dict(
      width=64, num_layers=2, num_heads=2, mlp_ratio=4,
      positions="rotary",  # rotary | learned | none
      max_len=128,         # learned positions only: the positional limit (tokens)
      tie_head=False,      # untied so the head alone can be fine-tuned (arithmetic)
      init="flax"))        # flax (flax's defaults) | gpt2 (GPT-2's: N(0, 0.02), lm/transformer.py)
  cfg.data = ml_collections.ConfigDict(dict(
      layout="aligned",     # aligned (y_t right after x_t, fed back) | concat (input then
                            # output) | position (y_t read at input position t, one pass)
      train_len=16, train_min_len=16,
      num_train=2000,       # fixed training strings per run; 0 = fresh strings every step
      test_size=1000,       # held-out strings at train_len, per seed
      length_max=32,        # length table: lengths 1..length_max
      length_per_len=200))  # held-out strings per length
  # From-scratch models; train.progress shows progress bars (both phases).
  cfg.train = _train(num_steps=2000, batch_size=32, chunk_size=200)
  cfg.train.progress = True
  cfg.optim = _optim(learning_rate=3e-4, warmup_steps=100)
  # Experts fine-tuned from the identity model (the arithmetic experiment).
  cfg.finetune = ml_collections.ConfigDict(dict(
      regimes=("head", "top1", "top2", "all"),  # from frozen features to full fine-tuning
      train=_train(num_steps=400, batch_size=32, chunk_size=200),
      optim=_optim(learning_rate=1e-3, warmup_steps=20)))
  cfg.compose = ml_collections.ConfigDict(dict(
      pairs=(("A>B", "C>D"), ("A>K", "M>B")),  # expert pairs, each composed over identity
      lambdas=(),               # one weight per expert of a pair; () = all 1
      # sampling (greedy=False): temperature, then top_k (0: off), top_p (1: off), min_p (0: off)
      temperature=1.0, greedy=True, **spec.truncation_fields(),
      ta_lambdas=(0.5, 1.0),    # task-arithmetic scales for the baselines
      k_experts=("A>B", "C>D", "E>F", "G>H", "I>J", "K>L", "M>N", "O>P"), k_max=8,
      overlap=("A>K", "A>B"), chain=("A>K", "K>Z"),
      kl_threshold=0.1,         # an expert is active at a step when KL(p_i||p_b) exceeds this
      tail_logp=-6.9,           # tail-risk diagnostics: tokens with log p_b below this
      qualitative=AUTHORS_STRINGS,  # decoded for each pair and seed (substitution rows)
      overlap_tol=0.01,         # flag: fraction of steps where two experts are both active
                                # (independent inits: 0.02-0.3% on factorized pairs, 3.6% overlap)
      ortho_cos_tol=0.1,        # flag: |cos| of the per-step log-ratio inner product
      ortho_norm_floor=1e-3,    # no cosine for an expert whose norm is below this x the largest
      eval_batch=1000,          # decode this many strings per call
      # each decoding step (composition/spec.py): operator paper | authors; mask none | top_p
      # (the background's nucleus of mass mask_p) | alpha (p_b >= mask_alpha max p_b); gate
      # none | kl (expert i only where KL(p_i||p_b) > gate_tau) | top1; eos composed |
      # background | vote | min (the rule for p(EOS))
      **spec.spec_fields()))
  return cfg


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
  """`preset` in PRESETS; every field can then be overridden with --config.a.b=value."""
  if preset not in PRESETS:
    raise ValueError(f"config field 'preset': unknown preset {preset!r}; allowed: {PRESETS}")
  cfg = base()
  cfg.preset = preset
  if preset == "authors":
    cfg.experiments = ("substitution", "length", "baselines", "background", "violations")
    # GPT2Config(n_positions=32, n_embd=64, n_layer=2, n_head=2): GELU MLP of 4x width, tied head
    # GPT2LMHeadModel's own initialisation (N(0, 0.02), residual projections / sqrt(2 n_layer),
    # LayerNorm eps 1e-5). Runs committed before this default used flax's: their config.json
    # has no model.init (read as 'flax'); --config.model.init=flax reproduces them.
    cfg.model.update(dict(width=64, num_layers=2, num_heads=2, mlp_ratio=4, positions="learned",
                          max_len=32, tie_head=True, init="gpt2"))
    cfg.data.update(dict(layout="position", length_max=32, length_per_len=100))
    # 5 epochs over 2000 strings at batch 1 (drawn with replacement); torch AdamW defaults:
    # weight decay 0.01, constant learning rate, no clipping.
    cfg.train.update(dict(num_steps=10_000, batch_size=1, chunk_size=1000))
    cfg.optim.update(dict(learning_rate=3e-4, warmup_steps=0, end_factor=1.0, grad_clip=0.0))
    cfg.compose.eval_batch = 1000
  elif preset == "paper":
    cfg.num_seeds = 5
    cfg.data.length_per_len = 500
    cfg.data.test_size = 2000
    cfg.compose.eval_batch = 4000
  elif preset == "quick":
    cfg.model.update(dict(width=32, mlp_ratio=2))
    cfg.train.update(dict(num_steps=150, chunk_size=50))
    cfg.optim.update(dict(learning_rate=3e-3, warmup_steps=20))
    cfg.finetune.train.update(dict(num_steps=100, chunk_size=50))
    cfg.finetune.optim.learning_rate = 3e-3
    cfg.data.length_per_len = 32
  elif preset == "tiny":
    cfg.num_seeds = 2
    cfg.init = "shared"  # independently initialised models this small do not compose (EM ~0)
    cfg.model.update(dict(width=16, num_layers=1, num_heads=1, mlp_ratio=2))
    cfg.finetune.regimes = ("head", "all")
    cfg.data.update(dict(train_len=6, train_min_len=6, num_train=0, test_size=64,
                         length_max=8, length_per_len=8))
    cfg.train.update(dict(num_steps=150, chunk_size=75, progress=False))
    cfg.optim.update(dict(learning_rate=1e-2, warmup_steps=10))
    cfg.finetune.train.update(dict(num_steps=50, chunk_size=50))
    cfg.finetune.optim.learning_rate = 1e-2
    cfg.compose.update(dict(pairs=(("A>B", "C>D"),), k_experts=("A>B", "C>D", "E>F"), k_max=3,
                            eval_batch=64))
  cfg.lock()
  return cfg
