"""The training-steps report section on hand-made rows whose right answer is known: the
extrapolated steps to fit against by-hand values, and the section's verdicts (rising ID shown,
flat ID not shown, one seed not judged)."""

import math

import numpy as np
import pytest

from compgen_jax.analysis import markdown as md
from compgen_jax.analysis import sections_steps
from compgen_jax.analysis.aggregate import Metric

ACC = (Metric("ood/acc_all", "OOD whole-trajectory accuracy", "ood_acc_all", "id/acc_all"),)


def _steps_rows(rng, id_by_steps: dict, ood_shift=-0.1, sd=0.005, seeds=2) -> list[dict]:
  return [{"task.num_modules": 8, "task.max_hotness": 3, "n_train": 10, "seed": s,
           "train.num_steps": steps, "id/acc_all": m + rng.normal(0, sd),
           "ood/acc_all": m + ood_shift + rng.normal(0, sd), "late_rise/acc_all": 0.02}
          for steps, m in id_by_steps.items() for s in range(seeds)]


def test_steps_to_reach_extrapolates_the_last_doubling():
  # +0.05 per doubling from 0.80 at 32000: 0.9 two doublings later, at 128000 (by hand)
  assert sections_steps.steps_to_reach([8000, 16000, 32000], [0.70, 0.75, 0.80]) == \
      pytest.approx(128000)
  # a 4x step counts as two doublings: +0.1 over 8000 -> 32000 is +0.05 per doubling
  assert sections_steps.steps_to_reach([8000, 32000], [0.70, 0.80]) == pytest.approx(128000)
  assert sections_steps.steps_to_reach([8000, 16000], [0.85, 0.92]) == 16000  # measured, not fitted
  assert sections_steps.steps_to_reach([8000, 16000], [0.80, 0.79]) == math.inf
  assert math.isnan(sections_steps.steps_to_reach([8000], [0.5]))


def test_reach_cells():
  assert md.reach(128000.0, [8000, 16000, 32000]) == "128,000"
  assert md.reach(16000.0, [8000, 16000]) == "16,000 (measured)"
  assert md.reach(math.inf, [8000]) == "never" and md.reach(math.nan, [8000]) == "-"
  # +0.001 per doubling from 0.80: 100 doublings away, printed as a bound, not a number
  far = sections_steps.steps_to_reach([8000, 16000], [0.799, 0.800])
  assert md.reach(far, [8000, 16000]) == "> 16,384,000 (over 10 doublings)"


def test_training_steps_section(tmp_path):
  rng = np.random.default_rng(7)
  rows = _steps_rows(rng, {8000: 0.70, 16000: 0.75, 32000: 0.80})
  text, claims = sections_steps.training_steps(rows, ACC, str(tmp_path))
  assert claims == []  # not a claim of the paper: nothing for the claims table
  assert "ID whole-trajectory accuracy rises with the training steps at every (M, K, n_train): " \
         "**shown**" in text
  assert "at 32,000 steps, students fit their training tasks" in text
  assert "| 8 | 3 | 10 | 8,000 / 16,000 / 32,000 |" in text
  row = next(line for line in text.splitlines() if line.startswith("| 8 | 3 | 10 | 8,000 /"))
  assert "(measured)" not in row
  extrapolated = float(row.split("|")[6].replace(",", ""))
  assert extrapolated == pytest.approx(128000, rel=0.15)  # the planted 0.05 per doubling
  # OOD sits 0.1 below ID: 0.70 at 32000, +0.05 per doubling -> 0.9 four doublings on
  assert float(row.split("|")[7].replace(",", "")) == pytest.approx(512000, rel=0.3)
  assert "task decoder" not in text  # no probes in these rows
  assert (tmp_path / "steps_ood_acc_all.png").exists()
  text, _ = sections_steps.training_steps(_steps_rows(rng, {8000: 0.85, 16000: 0.93}), ACC,
                                          str(tmp_path))
  row = next(line for line in text.splitlines() if line.startswith("| 8 | 3 | 10 | 8,000 /"))
  assert row.split("|")[6].strip() == "16,000 (measured)"
  flat = _steps_rows(rng, {8000: 0.80, 16000: 0.80, 32000: 0.80})
  text, _ = sections_steps.training_steps(flat, ACC, str(tmp_path))
  assert "ID whole-trajectory accuracy rises with the training steps at every (M, K, n_train): " \
         "**not shown**" in text
  text, _ = sections_steps.training_steps(_steps_rows(rng, {8000: 0.7, 16000: 0.8}, seeds=1),
                                          ACC, str(tmp_path))
  assert "**not judged**" in text and "one seed, no error bars" in text


def test_training_steps_reports_the_task_decoder_when_probed(tmp_path):
  rng = np.random.default_rng(3)
  R2 = (Metric("ood/r2", "OOD R^2", "ood_r2", "id/r2"),)
  rows = [{**r, "id/r2": r["id/acc_all"], "ood/r2": r["ood/acc_all"], "late_rise/r2": 0.01,
           "z/best/ood_r2": d + rng.normal(0, 0.003), "z/input/ood_r2": 0.56}
          for r, d in zip(_steps_rows(rng, {8000: 0.9, 16000: 0.93, 32000: 0.95}),
                          (0.70, 0.70, 0.80, 0.80, 0.90, 0.90), strict=True)]
  text, _ = sections_steps.training_steps(rows, R2, str(tmp_path))
  assert "task decoder R^2 rises with the training steps at every (M, K, n_train): **shown**" \
      in text
  assert "| task decoder R^2 | input decoder R^2 | seeds |" in text
  flat = [{**r, "z/best/ood_r2": 0.7 + rng.normal(0, 0.003)} for r in rows]
  text, _ = sections_steps.training_steps(flat, R2, str(tmp_path))
  assert "task decoder R^2 rises with the training steps at every (M, K, n_train): " \
         "**not shown**" in text
