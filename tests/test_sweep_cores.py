"""The local launcher's programs at once: each on its own share of the cores."""

import os
import subprocess
import sys

import pytest

from compgen_jax.analysis import sweep_report
from compgen_jax.sweeps import launch
from compgen_jax.sweeps import program as program_lib
from compgen_jax.types import ConfigError

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")


def test_core_shares_split_the_cores_disjointly(monkeypatch):
  monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 0, 5, 1})
  assert launch.core_shares(1) is None  # one program keeps every core
  assert launch.core_shares(2) == [(0, 3), (1, 5)]
  assert launch.core_shares(4) == [(0,), (1,), (3,), (5,)]
  with pytest.raises(ConfigError, match="5 programs at once need as many cores; this process "
                     "may use 4"):
    launch.core_shares(5)


def test_more_programs_than_cores_is_refused_before_anything_is_written(tmp_path):
  cores = len(os.sched_getaffinity(0))
  with pytest.raises(ConfigError, match="need as many cores"):
    launch.run_sweep("configs/sweeps/data_scaling.py:tiny", str(tmp_path / "s"),
                     parallel=cores + 1)
  assert not os.path.exists(tmp_path / "s")


def test_a_program_runs_on_its_share_only():
  core = min(os.sched_getaffinity(0))
  out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                       capture_output=True, text=True, check=True,
                       preexec_fn=program_lib._child_setup((core,))).stdout
  assert out.strip() == f"[{core}]"
  # without a share the child keeps the launcher's cores
  out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                       capture_output=True, text=True, check=True,
                       preexec_fn=program_lib._child_setup()).stdout
  assert out.strip() == str(sorted(os.sched_getaffinity(0)))


def test_the_report_states_the_elapsed_time_and_programs_at_once(tmp_path):
  index = {"spec": "configs/sweeps/x.py:cpu", "name": "x", "base": "b", "launcher": "local",
           "sweep_dir": str(tmp_path), "updated": "-", "programs": [
               {"name": n, "status": "done", "wall_s": 100.0, "command": "c", "log": "l",
                "workdir": n} for n in ("a", "b")]}
  text = sweep_report.runs_section(index, [], str(tmp_path))
  assert "total program wall time 200 s (3.3 min); index updated" in text  # older indexes
  index.update(parallel=2, elapsed_s=110.0)
  text = sweep_report.runs_section(index, [], str(tmp_path))
  assert ("total program wall time 200 s (3.3 min), elapsed 110 s (1.8 min) in the last "
          "invocation that ran programs (2 at a time, each on its own share of the cores); index "
          "updated") in text
