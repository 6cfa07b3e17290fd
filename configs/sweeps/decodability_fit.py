"""Decodability at fixed fit (hyperteacher): one student that fits its training tasks, OOD R^2
graded by the held-out fraction, task decodability (best layer by ID probe, last hidden layer)
against OOD R^2, to test the paper's R^2 > 0.95 where fit cannot carry the correlation.

  python experiments/sweep.py --config=configs/sweeps/decodability_fit.py:cpu \
      --sweep_dir=results/cpu/decodability_fit --probe --parallel=2
  python experiments/report.py --sweep_dir=results/cpu/decodability_fit
  python experiments/sweep.py --config=configs/sweeps/decodability_fit.py:paper --sweep_dir=/x \
      --launcher=slurm --slurm_partition=gpu --probe

M=16, K=3, random support, identity encoding. One program per held-out fraction, each with its
own base seed (`seed` 1, 2, ...), so that no two runs share a teacher, a split or an
initialisation (runs of one base seed share them across fractions): every run is its own
(program, seed) cluster of the report's cluster bootstrap (results/cpu/REGISTRATION.md).
Not a figure of the paper: its decodability claim (R^2 > 0.95) tested at fixed fit (issue 40).

Presets:
  paper: the same grid at the paper's model (MLP 4x1024) and schedule (300k steps, the data-
    scaling sweep's), 3 seeds per fraction. GPUs.
  cpu: MLP 4x128 at the data-scaling sweep's recipe (8000 steps at lr 1e-2, warmup + cosine),
    frac_ood 0.25, 0.35, ..., 0.95 (n_train 522 .. 35) x 3 seeds = 24 runs. There (data_scaling,
    M=16, K=3, width 128, base seed 0) ID R^2 was 0.927 / 0.930 / 0.937 / 0.954 at frac_ood 0.25
    / 0.5 / 0.75 / 0.9 and OOD 0.914 / 0.908 / 0.872 / 0.592: fit held, OOD graded. Deviations
    from the paper, for 2 CPU cores: width 128 (its 1024), 8000 steps (300k).
  tiny: M=6, K=2, frac_ood 0.25 / 0.5, 2 seeds, 100 steps of the tiny preset (tests).
"""

import ml_collections

from compgen_jax.scaling import grid

PRESETS = ("paper", "cpu", "tiny")
FRACS = (0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95)


def spread(n: int) -> list[int]:
  """0..n-1 in the order the extremes first, then the middles of the gaps (8: 0 7 3 1 5 2 4 6),
  so that a sweep stopped part-way has rows across the whole range of fractions."""
  order, gaps = ([0, n - 1] if n > 1 else list(range(n))), [(0, n - 1)]
  while gaps:
    lo, hi = gaps.pop(0)
    if hi - lo > 1:
      mid = (lo + hi) // 2
      order.append(mid)
      gaps += [(lo, mid), (mid, hi)]
  return order


def programs(M: int, K: int, fracs, **extra) -> tuple[dict, ...]:
  """One program per valid held-out fraction at (M, K), base seed 1, 2, ... in the order of
  `fracs`, run in the order of `spread`."""
  valid = grid.valid_fracs("random", M, K, fracs)
  ordered = [{"seed": i + 1, "task.frac_ood": f, **extra} for i, f in enumerate(valid)]
  return tuple(ordered[i] for i in spread(len(ordered)))


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"decodability_fit_{preset}"
  task = grid.table_task()  # M=16, K=3, random support
  if preset == "paper":
    cfg.base = "configs/hyperteacher.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": task, "encoding": {"name": "identity"},
                     "train": {"num_steps": 300_000}}
    cfg.programs = programs(16, 3, FRACS)
  elif preset == "cpu":
    cfg.base = "configs/hyperteacher.py:quick"
    cfg.overrides = {"num_seeds": 3, "task": task, "encoding": {"name": "identity"},
                     "student": {"mlp": {"width": 128, "depth": 4}}, **grid.cpu_fitting_recipe()}
    cfg.programs = programs(16, 3, FRACS)
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 2, "train": {"num_steps": 100}}
    cfg.programs = programs(6, 2, (0.25, 0.5))
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
