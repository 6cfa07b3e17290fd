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
  cpu: M in {6, 8, 10, 12, 16} x K = 3 (T 41..696), MLP 4x128 only = 5 programs, frac_ood
    {0.25, 0.5, 0.75} (and 0.9 instead of 0.25 at M=16) x 2 seeds (30 runs), the data-scaling
    recipe (8000 steps at lr 1e-2, warmup + cosine). The fractions bracket the crossing of OOD /
    ID = 0.9 that the data-scaling sweep measured (about 50 of 92 tasks at M=8, 150 of 696 at
    M=16). Deviations from the paper, for 2 CPU cores: K = 3 only (at K = 2 the 4x128 student
    memorises: ID 0.95-0.99 with OOD <= 0.46 in the data-scaling sweep, so no target relative
    to ID is reached), M <= 16, a 4x128 student, 8000 steps. Measured 19.8 min on 2 cores
    (373-428 s per program, two at a time, each on one core; `make -k reproduce-cpu` of
    2026-12-02; 43 min one at a time on the earlier sessions' slower machine). The transformer is
    left out (about 4x an MLP's cost per step on a CPU); transformer_vs_mlp.py:cpu compares the
    two.
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
                     "student": {"mlp": {"width": 128, "depth": 4}}, **grid.cpu_fitting_recipe()}
    cfg.programs = (_programs((6, 8, 10, 12), (3,), ("mlp",), (0.25, 0.5, 0.75))
                    + _programs((16,), (3,), ("mlp",), (0.5, 0.75, 0.9)))
  elif preset == "tiny":
    cfg.base = "configs/hyperteacher.py:tiny"
    cfg.overrides = {"num_seeds": 1, "task": {"support": "equal"}, "train": {"num_steps": 100}}
    cfg.programs = _programs((5, 6), (2,), ("mlp", "transformer"), (0.25, 0.5))
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
