"""Model size x task encoding (preference grid world): OOD per-action and whole-trajectory
accuracy against MLP width and depth for each encoding, and (with --probe) decodability of z.

  python experiments/sweep.py --config=configs/sweeps/preference_model_size.py:cpu \
      --sweep_dir=results/cpu/preference_model_size --probe
  python experiments/report.py --sweep_dir=results/cpu/preference_model_size
  python experiments/sweep.py --config=configs/sweeps/preference_model_size.py:paper \
      --sweep_dir=/x --launcher=slurm --slurm_partition=gpu --probe

Five encodings: the paper's six less few-shot, which is not defined for this family; `tokens`
is the reference's integer vector (the paper's "language"). Random support, frac_ood 0.25.

Presets:
  paper: the authors' grid (sweeps/scaling-model_preference.yaml): F=16, M=16, K=3, 5 encodings x
    depth {2, 4} x width {16, 32, ..., 2048} = 80 programs x 3 seeds (240 runs), lr 1e-4, 3M
    steps. For GPUs.
  cpu: F=8, M=8, K=3, 2 objects per scene, 5 encodings x MLP 2x64 and 2x256 = 10 programs x 2
    seeds (20 runs), the preference data-scaling sweep's piloted recipe and world
    (grid.preference_fitting_recipe: 16000 steps at lr 1e-2, warmup + cosine, batch 128 tasks;
    at 69 training tasks its 2x256 student reaches ID / OOD whole-trajectory accuracy 0.91 /
    0.88). Deviations from the paper, for 2 CPU cores: one depth (the paper's {2, 4}: a second
    depth would double the sweep past its 40 min budget; depth is judged on the hyperteacher,
    results/cpu/model_size), two widths (the three-width trend is in
    results/cpu/preference_data_scaling), F=8 (16), M=8 (16), 2 objects (4), 16000 steps (3M);
    the report's setting table lists them. Its measured time: results/cpu/NOTES.md.
  tiny: identity and tokens x depth 2 x width {16, 32}, 1 seed, 100 steps.
"""

import ml_collections

from compgen_jax.scaling import grid

PRESETS = ("paper", "cpu", "tiny")
ENCODINGS = ("identity", "orthogonal", "tokens", "invertible", "interval_shuffle")


def get_config(preset: str = "tiny") -> ml_collections.ConfigDict:
  """The named preset: paper, cpu or tiny."""
  cfg = ml_collections.ConfigDict()
  cfg.name = f"preference_model_size_{preset}"
  if preset == "paper":
    cfg.base = "configs/preference.py:paper"
    cfg.overrides = {"num_seeds": 3, "task": {"num_modules": 16, "max_hotness": 3,
                                              "num_features": 16, "frac_ood": 0.25}}
    encodings, depths = ENCODINGS, (2, 4)
    widths = (16, 32, 64, 128, 256, 512, 1024, 2048)
  elif preset == "cpu":
    cfg.base = "configs/preference.py:quick"
    cfg.overrides = {"num_seeds": 2, **grid.preference_fitting_recipe(
        {"num_modules": 8, "max_hotness": 3, "num_features": 8, "frac_ood": 0.25})}
    encodings, depths, widths = ENCODINGS, (2,), (64, 256)
  elif preset == "tiny":
    cfg.base = "configs/preference.py:tiny"
    cfg.overrides = {"num_seeds": 1, "train": {"num_steps": 100}, "probe": {"num_tasks": 64}}
    encodings, depths, widths = ("identity", "tokens"), (2,), (16, 32)
  else:
    raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
  cfg.programs = grid.product({"encoding.name": encodings, "student.mlp.depth": depths,
                               "student.mlp.width": widths})
  cfg.lock()
  return cfg
