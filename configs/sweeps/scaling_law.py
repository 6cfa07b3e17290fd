"""Scaling law (hyperteacher, `equal` support): how many training tasks a student needs to reach a
target OOD R^2, against the total number of tasks T(M, K), with a fitted power law.

  python experiments/sweep.py --config=configs/sweeps/scaling_law.py:cpu \
      --sweep_dir=results/cpu/scaling_law
  python experiments/report.py --sweep_dir=results/cpu/scaling_law
  python experiments/sweep.py --config=configs/sweeps/scaling_law.py:paper --sweep_dir=/x \
      --launcher=slurm --slurm_partition=gpu

One program per (M, K, student); the held-out fractions (numbers of training tasks) and seeds
are vmapped inside it, each fraction kept only where it leaves a valid support (grid.py). The
report reads off, per (M, K, student), the fewest training tasks whose mean OOD R^2 reaches the
target and fits log(tasks needed) = a + b log(T).

Presets:
  paper: the authors' grid (sweeps/scaling-law_hyperteacher.yaml): M in {10, 12, ..., 28} x K in
    {4, 5, 6} x {mlp (4x1024), transformer (4 layers, d_model 256)} = 60 programs, frac_ood from
    0.9 to 0.999999 (15 values; the 4-12 valid at each (M, K)) x 3 seeds (1464 runs),
    identity encoding, 300k steps. For GPUs.
  cpu: M in {6, 8, 10, 12} x K in {2, 3}, MLP 2x128 only = 8 programs, frac_ood in {0.25, 0.5,
    0.7, 0.8, 0.875, 0.9375, 0.97} (4-7 valid) x 2 seeds (84 runs, T 21..298), 2000 steps,
    quick-preset optimiser. Estimated 15 min on 2 cores (measured 157 s for the 14-run
    program). The transformer is left out of the CPU preset (about 10x an MLP's cost per step
    on a CPU); transformer_vs_mlp.py:cpu compares the two.
  tiny: M in {5, 6} x K = 2 x {mlp, transformer}, frac_ood {0.25, 0.5}, 1 seed, 100 steps.
"""

import ml_collections

from compgen_jax.sweeps import grid

PRESETS = ("paper", "cpu", "tiny")
PAPER_FRACS = (0.9, 0.95, 0.98, 0.99, 0.995, 0.9975, 0.999, 0.9995, 0.99975, 0.9999, 0.99995,
               0.999975, 0.99999, 0.999995, 0.999999)


def _programs(Ms, Ks, students, fracs) -> tuple[dict, ...]:
  return tuple(program for student in students
               for program in grid.scaling_programs("equal", Ms, Ks, fracs,
                                                    **{"student.name": student}))


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"scaling_law_{preset}"
  if preset == "paper":
    cfg.base = "configs/hyperteacher.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": {"support": "equal"},
                     "encoding": {"name": "identity"}, "train": {"num_steps": 300_000}}
    cfg.programs = _programs(range(10, 29, 2), (4, 5, 6), ("mlp", "transformer"), PAPER_FRACS)
  elif preset == "cpu":
    cfg.base = "configs/hyperteacher.py:quick"
    cfg.overrides = {"num_seeds": 2, "task": {"support": "equal"},
                     "student": {"width": 128, "depth": 2}, "train": {"num_steps": 2000}}
    cfg.programs = _programs((6, 8, 10, 12), (2, 3), ("mlp",),
                             (0.25, 0.5, 0.7, 0.8, 0.875, 0.9375, 0.97))
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 1, "task": {"support": "equal"}, "train": {"num_steps": 100}}
    cfg.programs = _programs((5, 6), (2,), ("mlp", "transformer"), (0.25, 0.5))
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
