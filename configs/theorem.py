"""Theorem 3.1 made concrete: the explicit ReLU network for the hyperteacher, measured.

  python experiments/train.py --config=configs/theorem.py:quick --workdir=/tmp/theorem_quick
  python experiments/train.py --config=configs/theorem.py:paper --workdir=/tmp/theorem_paper
  python experiments/train.py --config=configs/theorem.py:quick --workdir=/tmp/th \
      --config.theorem.resolutions="(8,16,32)" --config.theorem.sgd=False

Presets: paper (large N and M ranges, GPU-sized), quick (2 CPU cores, a few minutes including the
SGD comparison), tiny (seconds, for tests). `hyperteacher` is a full training config
(configs/hyperteacher.py): its task is the teacher that is approximated, and the rest drives the SGD
comparison, whose student widths are set to the constructed network's (2*I*H*N + H, H).
"""

import ml_collections

from compgen_jax.scaling import config as training_config

PRESETS = ("paper", "quick", "tiny")


def base() -> ml_collections.ConfigDict:
  cfg = ml_collections.ConfigDict()
  cfg.app = "theory"  # apps.APPS: what experiments/train.py runs
  cfg.seed = 0
  cfg.hyperteacher = training_config.base_config()
  cfg.hyperteacher.task.update(num_modules=8, max_hotness=2, input_dim=4, hidden_dim=4,
                               output_dim=4)
  cfg.hyperteacher.num_seeds = 2
  cfg.hyperteacher.optim.update(learning_rate=1e-3, schedule="warmup_cosine", warmup_steps=200)
  cfg.theorem = ml_collections.ConfigDict(dict(
      # Error vs N: sup error of the construction for each N, for num_teachers random teachers.
      resolutions=(4, 8, 16, 32, 64, 128), num_teachers=3,
      # The domain sample: tasks of the table (a random sample of max_tasks when it is larger),
      # weight_draws latents per task (the first is the all-ones vertex), inputs on a grid of
      # grid_points per dimension plus num_inputs uniform draws.
      max_tasks=512, weight_draws=4, grid_points=3, num_inputs=512,
      float64=True, max_elements=2 ** 24,  # hidden activations per evaluated chunk
      # Neuron count vs M at fixed eps: N is the largest required over the M range.
      eps=1e-3, num_modules=(4, 8, 12, 16, 24, 32), count_max_tasks=128,
      # SGD comparison: train students of the constructed widths at N = sgd_resolution.
      sgd=True, sgd_resolution=16))
  return cfg


def get_config(preset: str = "quick") -> ml_collections.ConfigDict:
  """The named preset: paper, quick or tiny."""
  cfg = base()
  if preset == "paper":
    cfg.hyperteacher.task.update(num_modules=16, max_hotness=3, input_dim=8, hidden_dim=8,
                                 output_dim=8)
    cfg.hyperteacher.num_seeds = 3
    cfg.hyperteacher.train.update(num_steps=100_000, checkpoint_every=10_000)
    cfg.hyperteacher.evals.id.every = cfg.hyperteacher.evals.ood.every = 5000
    cfg.theorem.update(resolutions=(4, 8, 16, 32, 64, 128, 256, 512, 1024), num_teachers=5,
                       max_tasks=2048, weight_draws=8, num_inputs=4096, eps=1e-4,
                       num_modules=(4, 8, 16, 24, 32, 48, 62), count_max_tasks=512,
                       sgd_resolution=32)
  elif preset == "quick":
    # float32 is exact enough down to errors ~1e-5 (N <= 128 here) and twice as fast on a CPU.
    cfg.theorem.update(float64=False, num_inputs=256, eps=2e-3, count_max_tasks=32)
    cfg.hyperteacher.train.update(num_steps=3000, chunk_size=250, log_every=50,
                                  checkpoint_every=3000)
    cfg.hyperteacher.evals.id.every = cfg.hyperteacher.evals.ood.every = 1000
  elif preset == "tiny":
    cfg.hyperteacher.task.update(num_modules=5, input_dim=2, hidden_dim=3, output_dim=2,
                                 num_samples=8)
    cfg.hyperteacher.optim.warmup_steps = 20
    cfg.hyperteacher.train.update(num_steps=100, batch_size=16, chunk_size=50, log_every=10,
                                  checkpoint_every=100, progress=False)
    cfg.hyperteacher.evals.id.update(every=100, num_tasks=32)
    cfg.hyperteacher.evals.ood.update(every=100, num_tasks=32)
    cfg.theorem.update(resolutions=(8, 16), num_teachers=2, weight_draws=2, num_inputs=64,
                       eps=1e-2, num_modules=(3, 5, 7), count_max_tasks=16, sgd_resolution=4)
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
