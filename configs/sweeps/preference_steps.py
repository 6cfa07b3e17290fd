"""Training steps (preference grid world): ID and OOD per-action and whole-trajectory accuracy
against the length of the training schedule, at two training-set sizes. Not a claim of the
paper: it measures whether the cpu preference students underfit by steps (the paper trains 3M,
the cpu presets 8000 then) and how fast more steps close the gap. It found that in the paper's
4-object world they would need about 50k-280k steps to fit whole trajectories, so the
preference claims' cpu presets now run in a 2-object world for 16000 steps
(grid.preference_fitting_recipe); this sweep keeps the 4 objects and the 8000-step recipe it
measured, and is not in `make reproduce-cpu` (`make reproduce-cpu-preference_steps`).

  python experiments/sweep.py --config=configs/sweeps/preference_steps.py:cpu \
      --sweep_dir=results/cpu/preference_steps --parallel=2
  python experiments/report.py --sweep_dir=results/cpu/preference_steps

One program per schedule length (each with its own warmup + cosine decay to its last step);
held-out fractions and seeds vmapped inside it. Random support, identity encoding.

Presets:
  paper: the paper's preference setting (M=16, K=3, F=32, frac_ood 0.25, MLP 2x1024, AdamW lr
    1e-4 constant, 3 seeds) at 375k, 750k, 1.5M and 3M steps (the paper's). For GPUs.
  cpu: the setting and recipe preference_data_scaling.py:cpu had until 2026-12-03, at its
    widest student (F=8, M=8, K=3, 4 objects, MLP 2x256, lr 1e-2 warmup + cosine, batch 128
    tasks) at 8000 (that sweep's schedule then), 16000 and 32000 steps, frac_ood {0.25, 0.9}
    (69 and 10 training tasks) x 2 seeds = 3 programs (12 runs), evaluated every 4000 steps.
    Its measured time: results/cpu/NOTES.md.
  tiny: F=5, M=4, K=2, frac_ood 0.25, 1 seed, 50 and 100 steps.
"""

import ml_collections

from compgen_jax.scaling import grid

PRESETS = ("paper", "cpu", "tiny")


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"preference_steps_{preset}"
  if preset == "paper":
    cfg.base = "configs/preference.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": {"support": "random", "num_features": 32},
                     "encoding": {"name": "identity"}}
    steps = (375_000, 750_000, 1_500_000, 3_000_000)
    cfg.programs = tuple(p for s in steps for p in grid.scaling_programs(
        "random", (16,), (3,), (0.25,), **{"train.num_steps": s}))
  elif preset == "cpu":
    cfg.base = "configs/preference.py:quick"
    recipe = grid.cpu_fitting_recipe()
    recipe["train"].update(checkpoint_every=8000)
    recipe["evals"] = {"id": {"every": 4000}, "ood": {"every": 4000}}
    cfg.overrides = {"num_seeds": 2, "task": {"support": "random", "num_features": 8}, **recipe}
    cfg.programs = tuple(p for s in (8000, 16000, 32000) for p in grid.scaling_programs(
        "random", (8,), (3,), (0.25, 0.9), **{"student.mlp.width": 256, "train.num_steps": s}))
  elif preset == "tiny":
    cfg.base = "configs/preference.py:tiny"
    cfg.overrides = {"num_seeds": 1, "task": {"num_features": 5},
                     "evals": {"id": {"every": 50}, "ood": {"every": 50}}}
    cfg.programs = tuple(p for s in (50, 100) for p in grid.scaling_programs(
        "random", (4,), (2,), (0.25,), **{"train.num_steps": s}))
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.lock()
  return cfg
