"""The transformer-vs-MLP report section on planted workdirs whose right answer is known: the
verdict at matched parameter counts (read from params.json, a clear error when it is missing) and
the training tasks each student needs."""

import json
import math
import os

import numpy as np
import pytest

from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import sections_students
from compgen_jax.analysis.aggregate import Metric
from compgen_jax.types import DataError
from tests.helpers import load_config

R2 = (Metric("ood/r2", "OOD R^2", "ood_r2", "id/r2"),)


def _student_workdir(path: str, params: int, **overrides) -> str:
  """A planted workdir: its config and the params.json training writes."""
  workdir_lib.prepare(path, load_config("hyperteacher", "tiny", **overrides))
  with open(os.path.join(path, workdir_lib.PARAMS_FILE), "w") as f:
    json.dump({"student": params}, f)
  return path


@pytest.mark.parametrize("seeds, gap, verdict", [(3, 0.2, "shown"), (3, 0.0, "not shown"),
                                                 (1, 0.2, "not judged")])
def test_transformer_vs_mlp(tmp_path, seeds, gap, verdict):
  workdirs = {"tf": _student_workdir(str(tmp_path / "tf"), 17_000,
                                 **{"student.name": "transformer"}),
              "mlp": _student_workdir(str(tmp_path / "mlp"), 17_100, **{"student.mlp.width": 124})}
  rng = np.random.default_rng(9)
  rows = [{"program": p, "workdir": wd, "student.name": "transformer" if p == "tf" else "mlp",
           "n_train": n, "seed": s, "id/r2": 1.0,
           "ood/r2": 0.1 * np.log(n) + (gap if p == "tf" else 0.0) + rng.normal(0, 0.01)}
          for p, wd in workdirs.items() for n in (4, 8, 16) for s in range(seeds)]
  text, (claim, needed) = sections_students.transformer_vs_mlp(rows, R2, str(tmp_path))
  assert claim["verdict"] == verdict, claim
  assert "parameter counts matched" in text and "ID R^2 | OOD R^2 | ID - OOD" in text
  # OOD <= 0.48 < 0.9 x ID everywhere: neither reaches the target, nothing to order
  assert needed["verdict"] == "not judged" and "not reached" in needed["ours"]
  assert "17,000 vs 17,100" in text
  os.remove(os.path.join(workdirs["mlp"], workdir_lib.PARAMS_FILE))
  sections_students.num_params.cache_clear()
  with pytest.raises(DataError, match="params.json: missing"):
    sections_students.transformer_vs_mlp(rows, R2, str(tmp_path))


def test_transformer_vs_mlp_tasks_needed(tmp_path):
  workdirs = {"tf": _student_workdir(str(tmp_path / "tf"), 17_000,
                                 **{"student.name": "transformer"}),
              "mlp": _student_workdir(str(tmp_path / "mlp"), 17_100, **{"student.mlp.width": 124})}
  rng = np.random.default_rng(11)
  # OOD / ID crosses 0.9 near 11 tasks for the transformer and near 22 for the MLP
  rows = [{"program": p, "workdir": wd, "student.name": "transformer" if p == "tf" else "mlp",
           "n_train": n, "seed": s, "id/r2": 1.0,
           "ood/r2": min(0.9 + 0.2 * math.log(n / (11 if p == "tf" else 22)), 0.98)
           + rng.normal(0, 0.01)}
          for p, wd in workdirs.items() for n in (4, 8, 16, 32, 64) for s in range(3)]
  _, (_, needed) = sections_students.transformer_vs_mlp(rows, R2, str(tmp_path))
  assert needed["verdict"] == "shown", needed
