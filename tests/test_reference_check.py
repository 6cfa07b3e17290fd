"""A learning test on the real teacher at the paper's setting, small enough for CI.

M=16, K=3, I=H=O=16, discrete weights, random support with a quarter held out, AdamW at the
paper's lr 3e-4 and weight decay 3e-3, 128 tasks x 16 samples per step, MLP 4x256 (the reference's
depth at a CPU width). The authors' code at this exact setting reaches OOD R^2 0.636 / 0.689
(seeds 0 / 1) after 500 steps and this code 0.652 / 0.662 (docs/evaluation.md, "Checked against
the reference code"); this code measured 0.68 after 600 steps on seed 0 (tests' XLA flags). With
the teacher or the optimiser of the paper broken (too little teacher variance, weight decay off,
a wrong learning rate) the curve moves, so a threshold below the reference's own 500-step value
catches a regression without depending on float details. The teacher's statistics are checked
against an independent numpy teacher in test_hyperteacher.py.
"""

import numpy as np
import pytest

from compgen_jax.scaling import train as scaling_train
from tests.helpers import load_config

pytestmark = pytest.mark.heavy  # collected first (tests/conftest.py)

STEPS = 600
MIN_OOD_R2 = 0.6


def test_mlp_4x256_at_paper_lr_learns_the_real_teacher(tmp_path):
  cfg = load_config("hyperteacher", "paper", **{
      "num_seeds": 1, "student.mlp.width": 256, "student.mlp.depth": 4, "train.num_steps": STEPS,
      "train.chunk_size": 100, "evals.id.every": STEPS, "evals.ood.every": STEPS,
      "train.checkpoint_every": STEPS, "train.progress": False})
  assert cfg.optim.learning_rate == 3e-4 and cfg.optim.weight_decay == 3e-3
  assert cfg.train.batch_size == 128 and cfg.task.num_samples == 16
  rows = scaling_train.train_and_evaluate(cfg, str(tmp_path / "ref"))
  ood = float(np.mean([r["ood/r2"] for r in rows]))
  print(f"OOD R^2 after {STEPS} steps: {ood:.4f}")
  assert ood > MIN_OOD_R2, ood
