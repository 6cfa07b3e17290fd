"""Compositional preference experiments (grid world; Redhardt, Akram, Schug 2025).

  python experiments/train.py --config=configs/preference.py:quick --workdir=/tmp/pref_quick
  python experiments/train.py --config=configs/preference.py:paper --workdir=/tmp/pref_paper \
      --config.encoding.name=orthogonal --config.task.support=equal

Presets: paper (the paper's setting, for a GPU), quick (2 CPU cores, < 10 minutes), tiny (tests).
Every encoding except few_shot applies (few-shot is not defined for this family).
"""

import ml_collections

from compgen_jax.scaling import config as training_config
from compgen_jax.tasks import preference

PRESETS = ("paper", "quick", "tiny")


def base() -> ml_collections.ConfigDict:
  """The paper's preference setting: MLP 2x1024, AdamW lr 1e-4, wd 1e-3, 3M steps."""
  cfg = training_config.base_config()
  cfg.app = "scaling"  # apps.APPS: what experiments/train.py runs
  cfg.task = preference.default_config()
  cfg.student.mlp.depth = 2
  cfg.optim.update(learning_rate=1e-4, weight_decay=1e-3)
  cfg.train.update(num_steps=3_000_000, chunk_size=1000, checkpoint_every=100_000)
  cfg.evals.id.every = cfg.evals.ood.every = 50_000
  cfg.probe.targets = ("z",)  # 'theta' (teacher weights) is hyperteacher only
  return cfg


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
  """The named preset: paper, quick or tiny."""
  cfg = base()
  if preset == "paper":
    # The paper's setting, stated here although base() holds it: M=16 modules, K<=3, 32
    # features, a quarter held out; MLP 2x1024; AdamW at constant lr 1e-4, weight decay 1e-3;
    # 3M steps; 3 seeds.
    cfg.num_seeds = 3
    cfg.task.update(num_modules=16, max_hotness=3, num_features=32, frac_ood=0.25,
                    support="random")
    cfg.student.name = "mlp"
    cfg.student.mlp.update(width=1024, depth=2)
    cfg.optim.update(learning_rate=1e-4, weight_decay=1e-3, schedule="constant")
    cfg.train.update(num_steps=3_000_000, batch_size=128)
  elif preset == "quick":
    # Fewer modules and features than the paper so a 2-core CPU gets to OOD acc >= 0.8 in time.
    cfg.num_seeds = 1
    cfg.task.update(num_modules=8, max_hotness=3, num_features=8)
    cfg.student.mlp.width = 256
    cfg.optim.update(learning_rate=1e-3, schedule="warmup_cosine", warmup_steps=200)
    cfg.train.update(num_steps=6000, chunk_size=250, log_every=50, checkpoint_every=1000)
    cfg.evals.id.update(every=500, num_tasks=512)
    cfg.evals.ood.update(every=500, num_tasks=512)
  elif preset == "tiny":
    cfg.num_seeds = 2
    cfg.task.update(num_modules=4, max_hotness=2, num_features=4, frac_ood=0.3)
    cfg.student.mlp.update(width=64, depth=2)
    cfg.optim.learning_rate = 3e-3
    cfg.train.update(num_steps=200, batch_size=32, chunk_size=50, log_every=10,
                     checkpoint_every=100, progress=False)
    cfg.evals.id.update(every=100, num_tasks=128)
    cfg.evals.ood.update(every=100, num_tasks=128)
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
