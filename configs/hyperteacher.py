"""Hyperteacher experiments (Redhardt, Akram, Schug 2025).

  python experiments/train.py --config=configs/hyperteacher.py:quick --workdir=/tmp/ht_quick
  python experiments/train.py --config=configs/hyperteacher.py:paper --workdir=/tmp/ht_paper \
      --config.encoding.name=orthogonal --config.sweep.frac_ood="(0.25,0.5,0.75)"
  python experiments/train.py --config=configs/hyperteacher.py:quick --workdir=/tmp/ht_tf \
      --config.student.name=transformer --config.student.transformer.d_model=64 \
      --config.encoding.name=language

`student.name` picks the student; each reads only its own subsection (student.mlp.width,
student.transformer.d_model, student.hypernetwork.hidden, ...).

Presets: paper (the paper's setting, for a GPU), quick (2 CPU cores, minutes), tiny (tests).
Training evaluates what `evals` lists (id and ood); to add or replace evaluators from the command
line give the whole section, e.g. --config.evals="{'id': {'every': 500}, 'ood_hotness': {}}"
(omitted settings take their defaults; every=0 evaluates only at the last step).
Array-valued sweep axes (sweep.frac_ood, sweep.learning_rate, sweep.weight_decay) multiply the
seeds; all runs are one compiled program.
"""

import ml_collections

from compgen_jax.scaling import config as training_config

PRESETS = ("paper", "quick", "tiny")


def base() -> ml_collections.ConfigDict:
  """The paper's hyperteacher setting (the shared training config's defaults)."""
  cfg = training_config.base_config()
  cfg.app = "scaling"  # apps.APPS: what experiments/train.py runs
  return cfg


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
  """The named preset: paper, quick or tiny."""
  cfg = base()
  if preset == "paper":
    # The paper's setting (shared/papers: "Scaling can lead to compositional generalization"),
    # stated here although the sections' defaults hold it: M=16 modules, K<=3 of them per task,
    # a quarter held out; MLP 4x1024 (the reference's transformer and hypernetwork beside it);
    # AdamW at constant lr 3e-4, weight decay 3e-3; 128 tasks x 16 samples; 100k steps; 3 seeds.
    cfg.num_seeds = 3
    cfg.task.update(num_modules=16, max_hotness=3, frac_ood=0.25, support="random",
                    input_dim=16, hidden_dim=16, output_dim=16, num_samples=16)
    cfg.student.name = "mlp"
    cfg.student.mlp.update(width=1024, depth=4)
    cfg.student.transformer.update(num_layers=4, d_model=256, num_heads=4, ffw_dim=1024)
    cfg.student.hypernetwork.update(hidden=1024, layernorm=True)
    cfg.optim.update(learning_rate=3e-4, weight_decay=3e-3, schedule="constant")
    cfg.train.update(num_steps=100_000, batch_size=128)
    cfg.evals.id.update(every=5000, num_tasks=1024)
    cfg.evals.ood.update(every=5000, num_tasks=1024)
  elif preset == "quick":
    cfg.num_seeds = 2
    # Deviations from the reference's students (paper preset), for 2 CPU cores: smaller sizes, and
    # the hypernetwork's layernorm off (LayerNorm is scale-invariant and erases z's weights; see
    # docs).
    cfg.student.mlp.width = 256
    cfg.student.transformer.update(num_layers=2, d_model=128, ffw_dim=512)
    cfg.student.hypernetwork.update(hidden=128, layernorm=False)
    cfg.optim.learning_rate = 1e-3
    cfg.optim.schedule = "warmup_cosine"
    cfg.optim.warmup_steps = 200
    cfg.train.update(num_steps=4000, chunk_size=250, log_every=50, checkpoint_every=1000)
    cfg.evals.id.every = cfg.evals.ood.every = 500
  elif preset == "tiny":
    cfg.num_seeds = 2
    cfg.task.update(num_modules=6, max_hotness=2, input_dim=4, hidden_dim=8, output_dim=2,
                    num_samples=8)
    # Deviations from the reference's students, for test speed: as in quick, smaller still.
    cfg.student.mlp.update(width=64, depth=2)
    cfg.student.transformer.update(num_layers=2, d_model=32, num_heads=2, ffw_dim=64)
    cfg.student.hypernetwork.update(hidden=32, layernorm=False)
    cfg.optim.learning_rate = 3e-3
    cfg.train.update(num_steps=200, batch_size=32, chunk_size=50, log_every=10,
                     checkpoint_every=100, progress=False)
    cfg.evals.id.update(every=100, num_tasks=64)
    cfg.evals.ood.update(every=100, num_tasks=64)
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
