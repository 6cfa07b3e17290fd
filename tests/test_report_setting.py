"""A report's setting against the paper's (analysis/setting.py): which config values count as
deviations from a sweep's paper preset, on planted configs and on a committed sweep."""

import json
import os

from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import setting
from compgen_jax.sweeps import spec
from tests import helpers
from tests.helpers import REPO


def _cfg(**kv):
  base = {"student.name": "mlp", "student.mlp.width": 256, "student.transformer.d_model": 64,
          "encoding.name": "identity", "encoding.inn_init_scale": 1.05, "task.frac_ood": 0.25,
          "sweep.frac_ood": (), "optim.learning_rate": 0.01, "sweep.learning_rate": (),
          "train.num_steps": 8000, "num_seeds": 2}
  return {**base, **kv}


def test_values_count_keys_where_they_apply_and_vmapped_axes():
  mlp, trf = _cfg(), _cfg(**{"student.name": "transformer", "student.mlp.width": 999})
  # a student's keys only where that student trains; an encoding's only where it is used
  assert setting.values([mlp, trf], "student.mlp.width") == {256}
  assert setting.values([mlp, trf], "student.transformer.d_model") == {64}
  assert setting.values([mlp], "encoding.inn_init_scale") == set()
  assert setting.values([_cfg(**{"encoding.name": "invertible"})],
                        "encoding.inn_init_scale") == {1.05}
  # a vmapped tuple replaces the scalar it sweeps; an empty one leaves the scalar
  assert setting.values([_cfg(**{"sweep.frac_ood": (0.5, 0.9)}), mlp],
                        "held-out fraction") == {0.5, 0.9, 0.25}
  assert setting.values([_cfg(**{"sweep.learning_rate": (1e-3, 3e-3)})],
                        "optim.learning_rate") == {1e-3, 3e-3}


def test_deviations_are_values_the_paper_never_takes():
  paper = [_cfg(**{"student.mlp.width": w, "train.num_steps": 300_000, "num_seeds": 3,
                   "optim.learning_rate": 3e-4}) for w in (64, 256, 1024)]
  ours = [_cfg(**{"student.mlp.width": w}) for w in (64, 256)]
  found = {key: (mine, theirs) for key, mine, theirs in setting.deviations(ours, paper)}
  # widths the paper also sweeps are no deviation; steps, seeds and learning rate are
  assert set(found) == {"optim.learning_rate", "train.num_steps", "num_seeds"}
  assert found["train.num_steps"] == ({8000}, {300_000})
  assert setting.deviations(paper[:1], paper) == []


def test_section_of_a_committed_sweep_and_of_one_without_a_paper_preset(tmp_path):
  sweep_dir = os.path.join(REPO, "results", "cpu", "encoding_nonlinearity")
  index = workdir_lib.read_index(sweep_dir)
  text = setting.section(index, sweep_dir)  # from the paper_programs.json its launch wrote
  rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()
          if line.startswith("| ") and "---" not in line}
  # the paper preset trains 300k steps at MLP 4x1024 and M=16, K=3 as the cpu one does
  assert "300,000" in rows["train.num_steps"] and "1,024" in rows["student.mlp.width"]
  assert "task.num_modules" not in rows and "encoding.inn_init_scale" not in rows
  # the committed file is what a launch writes today (the paper preset, built and validated)
  spec.write_paper_programs(str(tmp_path), index["spec"])
  with open(tmp_path / workdir_lib.PAPER_PROGRAMS_FILE) as a, open(os.path.join(
      sweep_dir, workdir_lib.PAPER_PROGRAMS_FILE)) as b:
    assert json.load(a) == json.load(b)
  # a paper preset that does not load, and a sweep dir without the file, say so
  spec.write_paper_programs(str(tmp_path), "configs/sweeps/no_such_sweep.py:cpu")
  missing = setting.section({**index, "spec": "configs/sweeps/no_such_sweep.py:cpu"},
                            str(tmp_path))
  assert missing.startswith("Not compared") and "no_such_sweep.py:paper" in missing
  os.remove(tmp_path / workdir_lib.PAPER_PROGRAMS_FILE)
  assert setting.section(index, str(tmp_path)).startswith("Not compared: no `paper_programs")


def test_every_config_key_is_compared_but_bookkeeping_and_keys_the_paper_never_reads():
  # a student, task field and optimiser field that no list in setting.py names
  ours = [_cfg(**{"student.name": "kan", "student.kan.grid_size": 5, "task.noise": 0.1,
                  "optim.schedule": "warmup_cosine", "optim.warmup_steps": 200,
                  "train.log_every": 100})]
  paper = [_cfg(**{"student.name": "kan", "student.kan.grid_size": g, "task.noise": 0.0,
                   "optim.schedule": "constant", "optim.warmup_steps": 1000,
                   "train.log_every": 1000}) for g in (8, 16)]
  found = {key: (mine, theirs) for key, mine, theirs in setting.deviations(ours, paper)}
  assert found["student.kan.grid_size"] == ({5}, {8, 16}) and found["task.noise"] == ({0.1}, {0.0})
  # logging is bookkeeping; a warmup the paper's constant schedule never reads is no row of its
  # own (its schedule's is); the mlp's width is not read where the kan student trains
  assert set(found) == {"student.kan.grid_size", "task.noise", "optim.schedule"}
  keys = [key for key, _, _ in setting.compared(ours, paper)]
  assert "train.log_every" not in keys and "student.mlp.width" not in keys
  assert keys.index("task.noise") < keys.index("student.kan.grid_size") < keys.index("num_seeds")


def test_a_planted_field_reaches_the_section_of_a_committed_sweep(tmp_path):
  sweep_dir = helpers.committed_copy(
      os.path.join(REPO, "results", "cpu", "encoding_nonlinearity"), str(tmp_path / "sweep"))
  index = workdir_lib.read_index(sweep_dir)
  for entry in index["programs"]:
    path = os.path.join(workdir_lib.located(sweep_dir, index, entry["workdir"]),
                        workdir_lib.CONFIG_FILE)
    with open(path) as f:
      cfg = json.load(f)
    cfg["student"]["mlp"]["activation"] = "gelu"
    with open(path, "w") as f:
      json.dump(cfg, f)

  assert "| student.mlp.activation" not in setting.section(index, sweep_dir)  # paper: no such key
  path = os.path.join(sweep_dir, workdir_lib.PAPER_PROGRAMS_FILE)
  with open(path) as f:
    saved = json.load(f)
  saved["programs"] = [{**c, "student.mlp.activation": "relu"} for c in saved["programs"]]
  with open(path, "w") as f:
    json.dump(saved, f)
  assert "| student.mlp.activation | gelu | relu |" in setting.section(index, sweep_dir)
