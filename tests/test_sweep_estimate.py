"""experiments/sweep.py --estimate: each program's runs, steps, parameters and hours, timed or
from a rates file, with nothing written; and the launcher's longest-first order from the same
cost proxy (estimate.work)."""

import json
import os

import pytest

from compgen_jax.sweeps import estimate, launch, spec
from tests.helpers import REPO, load_config, run_sweep_binary, sweep_config_file

# Two tiny MLP programs of one family, widths 8 and 16 (launch.longest_first orders them).
TWO_WIDTHS = """
import ml_collections


def get_config(preset):
  cfg = ml_collections.ConfigDict()
  cfg.name = "two_widths_" + preset
  cfg.base = "configs/hyperteacher.py:tiny"
  cfg.overrides = {"num_seeds": 1, "train": {"num_steps": 200}}
  cfg.programs = ({"student.mlp.width": 8}, {"student.mlp.width": 16})
  return cfg
"""


def test_estimate_times_each_program_and_writes_nothing(tmp_path, capsys):
  sweep_dir = tmp_path / "s"
  spec_ = f"{REPO}/configs/sweeps/data_scaling.py:tiny"
  rows = estimate.run_estimate(spec_, str(sweep_dir))
  programs = spec.load(spec_, str(sweep_dir)).programs
  assert [r.name for r in rows] == [p.name for p in programs]
  assert [r.runs for r in rows] == [2 * len(p.overrides["sweep.frac_ood"]) for p in programs]
  assert all(r.steps == 100 and r.params > 0 and r.steps_per_s > 0 for r in rows)
  out = capsys.readouterr().out
  printed = {line.split()[0]: line.split()[1] for line in out.splitlines() if line[:1] == "M"}
  assert printed == {r.name: str(r.runs) for r in rows} and "total: 2 programs" in out
  assert not os.path.exists(sweep_dir)


def test_estimate_from_a_rates_file_skips_timing(tmp_path):
  rates = {"width-16_depth-1": 2.0, "width-32_depth-2": 0.5}
  path = tmp_path / "rates.json"
  path.write_text(json.dumps({"device": "a test", "steps_per_s": rates}))
  result = run_sweep_binary(f"--config={REPO}/configs/sweeps/width_depth_demo.py:tiny",
                  f"--sweep_dir={tmp_path / 's'}", "--estimate", f"--rates={path}")
  assert result.returncode == 0, result.stderr[-2000:]
  assert "timing" not in result.stdout and "rates from a test" in result.stdout
  rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()
          if line.startswith("width-")}
  assert len(rows) == 4 and rows["width-16_depth-2"][-2:] == ["nan", "-"]
  for name, rate in rates.items():  # hours = steps / rate; 100 steps each
    assert float(rows[name][-2]) == pytest.approx(100 / rate / 3600, rel=1e-3)
  assert not os.path.exists(tmp_path / "s")


def test_shape_key_ignores_only_the_students_a_config_does_not_train():
  cfg = load_config("hyperteacher", "tiny")
  key = estimate.shape_key(cfg)
  with cfg.unlocked():
    cfg.student.transformer.d_model *= 2
    cfg.student.hypernetwork.hidden *= 2
  assert estimate.shape_key(cfg) == key
  cfg.student.mlp.width *= 2
  assert estimate.shape_key(cfg) != key
  cfg.student.name = "transformer"
  transformer_key = estimate.shape_key(cfg)
  cfg.student.transformer.d_model *= 2
  assert estimate.shape_key(cfg) != transformer_key


def test_longest_programs_start_first_and_only_within_one_family(tmp_path_factory, tmp_path):
  path = sweep_config_file(tmp_path_factory, TWO_WIDTHS, "two_widths")
  programs = list(spec.load(f"{path}:cpu", str(tmp_path)).programs)
  width = lambda ps: [p.config.student.mlp.width for p in ps]
  assert width(programs) == [8, 16]
  assert width(launch.longest_first(programs)) == [16, 8]
  assert width(launch.longest_first(programs[::-1])) == [16, 8]
  # more steps outweigh a wider student: width 8 at 4x the steps has more run-steps x params
  longer = programs[0].config.copy_and_resolve_references()
  longer.train.num_steps *= 4
  assert width(launch.longest_first([programs[1], programs[0]._replace(config=longer)])) == [8, 16]
  # a transformer among MLPs: the proxy does not compare across students, config order stays
  other = programs[0].config.copy_and_resolve_references()
  other.student.name = "transformer"
  mixed = [programs[0]._replace(config=other), programs[1]]
  assert launch.longest_first(mixed) == mixed
  unloaded = [programs[0]._replace(config=None), programs[1]]
  assert launch.longest_first(unloaded) == unloaded
