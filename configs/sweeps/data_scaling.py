"""Data scaling (hyperteacher): OOD R^2 against the number of training tasks, per (M, K).

  python experiments/sweep.py --config=configs/sweeps/data_scaling.py:cpu \
      --sweep_dir=results/cpu/data_scaling --probe
  python experiments/report.py --sweep_dir=results/cpu/data_scaling
  python experiments/sweep.py --config=configs/sweeps/data_scaling.py:paper --sweep_dir=/x \
      --launcher=slurm --slurm_partition=gpu --probe

One program per (M, K) (they change array shapes); its held-out fractions (hence numbers of
training tasks) and seeds are vmapped inside it. A fraction that leaves too few training tasks
for a compositional, connected support at that (M, K) is left out of that program (grid.py).

Presets:
  paper: the authors' grid (sweeps/scaling-data_hyperteacher.yaml): M in {8, 16, 24, 32} x K in
    2..7 = 24 programs, frac_ood in {0.125, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99} (the 4-8
    valid at each (M, K)) x 3 seeds = 12-24 runs each (522 runs), random support, identity
    encoding, MLP 4x1024, 300k steps (the authors' 38.4M tasks at batch 128). For GPUs.
  cpu: M in {8, 16} x K in {2, 3} = 4 programs, frac_ood {0.25, 0.5, 0.75} (and 0.9 at M=16,
    K=3; n_train 9..522) x 2 seeds (4 at M=8, K=2, whose 9-27 held-out tasks make a noisy OOD
    mean), MLP 4x128, plus the scale trend at M=16, K=3: MLP 4x32 and 4x64 at the same
    fractions = 6 programs, 48 runs. 8000 steps at lr 1e-2 (warmup + cosine),
    batch 128 x 16: the pilot (M=16, K=3, frac 0.25, one seed) reached ID 0.927 / OOD 0.912
    there, against 0.909 / 0.892 at lr 3e-3 and 0.878 / 0.862 after 3000 steps. Deviations from
    the paper, for 2 CPU cores: M <= 16, a 4x128 student (the paper's 4x1024) and 8000 steps
    (300k).
  tiny: M in {5, 6} x K = 2, frac_ood {0.25, 0.5}, 2 seeds, 100 steps of the tiny preset
    (seconds; tests).
"""

import ml_collections

from compgen_jax.scaling import grid

PRESETS = ("paper", "cpu", "tiny")
PAPER_FRACS = (0.125, 0.25, 0.5, 0.75, 0.9, 0.95, 0.98, 0.99)


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"data_scaling_{preset}"
  if preset == "paper":
    cfg.base = "configs/hyperteacher.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": {"support": "random"},
                     "encoding": {"name": "identity"}, "train": {"num_steps": 300_000}}
    cfg.programs = grid.scaling_programs("random", (8, 16, 24, 32), range(2, 8), PAPER_FRACS)
  elif preset == "cpu":
    cfg.base = "configs/hyperteacher.py:quick"
    cfg.overrides = {"num_seeds": 2, "student": {"mlp": {"width": 128, "depth": 4}},
                     **grid.cpu_fitting_recipe()}
    few, more = (0.25, 0.5, 0.75), (0.25, 0.5, 0.75, 0.9)
    # M=8, K=2 holds out 9-27 of its 36 tasks, so its OOD mean rests on few tasks and its 2
    # seeds spread by 0.1 (the 2-seed run: 0.11 / 0.01 / 0.35, last - first +0.24 [-0.03,
    # +0.51]): 4 seeds there
    cfg.programs = (grid.scaling_programs("random", (8,), (2,), few, num_seeds=4)
                    + grid.scaling_programs("random", (8,), (3,), few)
                    + grid.scaling_programs("random", (16,), (2,), few)
                    + grid.scaling_programs("random", (16,), (3,), more)
                    + grid.scaling_programs("random", (16,), (3,), more,
                                            **{"student.mlp.width": 32})
                    + grid.scaling_programs("random", (16,), (3,), more,
                                            **{"student.mlp.width": 64}))
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 2, "train": {"num_steps": 100}}
    cfg.programs = grid.scaling_programs("random", (5, 6), (2,), (0.25, 0.5))
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
