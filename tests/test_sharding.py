"""The run axis sharded over several devices: sharded run i == unsharded run i, the state stays
sharded with no collective in the chunk, and a checkpoint written with 4 devices resumes with 1,
with 3 and as a 2-process jax.distributed job. The device count is fixed when JAX starts, so
each device count is a subprocess with forced host devices
(XLA_FLAGS=--xla_force_host_platform_device_count=N)."""

import json
import os
import shutil
import socket
import subprocess
import sys
from types import SimpleNamespace

import jax
import numpy as np
import pytest

from compgen_jax import checkpointing, metric_writer
from compgen_jax.training import sharding
from tests.helpers import REPO

# heavy: collected first (tests/conftest.py); the group: one worker builds the module's `runs`
pytestmark = [pytest.mark.heavy, pytest.mark.xdist_group("sharding")]

# 3 runs: padded to 4 on 4 devices (a copy of run 2), unpadded on 1 and 3.
OVERRIDES = {"num_seeds": 3, "train.num_steps": 100, "train.checkpoint_every": 50}

# Runs in the subprocess: argv[1] is a JSON list of jobs; prints one JSON line of results.
_SCRIPT = """
import json, os, sys
import jax
from compgen_jax import checkpointing, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.scaling import runs
from compgen_jax.scaling import train as scaling_train
from compgen_jax.training import loop, sharding
from tests.helpers import load_config

cfg = load_config("hyperteacher", "tiny", **json.loads(sys.argv[1]))
out = {"devices": jax.device_count()}
for job, workdir, stop_after in json.loads(sys.argv[2]):
  if job == "inspect":
    mesh = sharding.make_mesh()
    grid = runs.precompute_splits(cfg, runs.run_grid(cfg))
    _, state = loop.restore_or_init(scaling_train.family(cfg, grid), workdir, mesh)
    bits_T = sharding.replicate(scaling_train.task_bits(cfg), mesh)
    chunk = scaling_train.make_chunk(cfg, cfg.train.chunk_size)
    hlo = chunk.lower(state, bits_T).compile().as_text()
    def placement(tree):
      return sorted({(len(a.sharding.device_set), a.addressable_shards[0].data.shape[0],
                      a.shape[0], a.sharding.is_equivalent_to(sharding.run_sharding(mesh), a.ndim))
                     for a in jax.tree.leaves(tree)})
    out["init"] = placement(state)
    state, metrics, finite = chunk(state, bits_T)
    out["chunk"] = placement((state, metrics, finite))
    out["collectives"] = [op for op in ("all-gather", "all-reduce", "all-to-all",
                                        "collective-permute", "reduce-scatter") if op in hlo]
  elif job == "passes":  # standalone evaluate and probe over the workdir's checkpoints
    from compgen_jax.scaling import passes
    out[workdir] = {"eval": passes.evaluate_workdir(workdir, every=True),
                    "probe": passes.probe_workdir(workdir)}
  else:
    scaling_train.train_and_evaluate(cfg, workdir, stop_after)
    out[workdir] = metric_writer.read_rows(os.path.join(workdir, workdir_lib.METRICS_FILE))
print(json.dumps(out))
"""


def _run(num_devices: int, jobs: list) -> dict:
  flags = (os.environ.get("XLA_FLAGS", "")
           + f" --xla_force_host_platform_device_count={num_devices}").strip()
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags)
  result = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(OVERRIDES), json.dumps(jobs)],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  out = json.loads(result.stdout.strip().splitlines()[-1])
  assert out["devices"] == num_devices
  return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """Rows of: 1 device uninterrupted (the reference), 4 devices uninterrupted, and a 4-device run
  stopped at its step-50 checkpoint then resumed with 1 device, with 3, and by 2 processes of 2
  devices each (jax.distributed); and the standalone evaluate and probe passes over copies of
  the reference run with 1 device and with 4 (jobs share subprocesses: each costs a JAX start)."""
  tmp = tmp_path_factory.mktemp("sharding")
  d = {name: str(tmp / name) for name in ("inspect", "ref", "four", "to1", "to3", "to2x2", "p1",
                                          "p4")}
  ref = _run(1, [["train", d["ref"], None]])
  for name in ("p1", "p4"):
    shutil.copytree(d["ref"], d[name])
  four = _run(4, [["inspect", d["inspect"], None], ["train", d["four"], None],
                  ["train", d["to1"], 50], ["passes", d["p4"], None]])
  shutil.copytree(d["to1"], d["to3"])
  shutil.copytree(d["to1"], d["to2x2"])
  one = _run(1, [["train", d["to1"], None], ["passes", d["p1"], None]])
  three = _run(3, [["train", d["to3"], None]])
  _run_two_processes(d["to2x2"])
  return {"inspect": four, "ref": ref[d["ref"]], "four": four[d["four"]],
          "to1": one[d["to1"]], "to3": three[d["to3"]],
          "to2x2": metric_writer.read_rows(os.path.join(d["to2x2"], "metrics.jsonl")),
          "to2x2_steps": checkpointing.available_steps(os.path.join(d["to2x2"], "checkpoints")),
          "passes1": one[d["p1"]], "passes4": four[d["p4"]], "p4_dir": d["p4"]}


def _run_two_processes(workdir: str) -> None:
  """experiments/train.py --distributed as 2 processes of 2 CPU devices each on this machine (a
  jax.distributed job over localhost), resuming `workdir`."""
  with socket.socket() as s:
    s.bind(("localhost", 0))
    port = s.getsockname()[1]
  flags = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()
  env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=flags)
  overrides = [f"--config.{k}={v}" for k, v in OVERRIDES.items()]
  procs = [subprocess.Popen(
      [sys.executable, os.path.join(REPO, "experiments", "train.py"),
       "--config=configs/hyperteacher.py:tiny", f"--workdir={workdir}", *overrides,
       "--distributed", f"--coordinator_address=localhost:{port}", "--num_processes=2",
       f"--process_id={i}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
      env=env) for i in range(2)]
  for proc in procs:
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]


def _assert_rows_close(rows, ref):
  """Same rows (runs, steps, keys); numbers equal to float32 rounding, as the vmapped == solo
  test of tests/test_training.py allows (a device's batch of runs is a different XLA loop)."""
  assert [(r["step"], r["run"]) for r in rows] == [(r["step"], r["run"]) for r in ref]
  for row, want in zip(rows, ref, strict=True):
    assert row.keys() == want.keys()
    for k, v in want.items():
      if isinstance(v, float):
        np.testing.assert_allclose(row[k], v, rtol=1e-5, atol=1e-6, err_msg=f"{k} {want}")
      else:
        assert row[k] == v, (k, want)


def test_four_devices_write_the_rows_of_one_device(runs):
  assert len(runs["ref"]) == 3 * 100 // 10  # 3 real runs, a row per 10 steps: no padding rows
  assert {r["run"] for r in runs["four"]} == {0, 1, 2}
  _assert_rows_close(runs["four"], runs["ref"])


def test_state_is_sharded_over_four_devices_and_the_chunk_has_no_collective(runs):
  """Every leaf of the state, the metrics and finite: 4 runs (3 + 1 padding), one per device,
  still sharded after a chunk (no resharding between chunks), and no communication compiled."""
  out = runs["inspect"]
  assert out["init"] == [[4, 1, 4, True]], out["init"]
  assert out["chunk"] == [[4, 1, 4, True]], out["chunk"]
  assert out["collectives"] == []


def test_checkpoint_of_four_devices_resumes_on_one_and_three(runs):
  assert runs["to1"][-1]["step"] == 100
  _assert_rows_close(runs["to1"], runs["ref"])
  _assert_rows_close(runs["to3"], runs["ref"])


def test_two_processes_resume_and_only_process_0_writes_rows(runs):
  """A multi-host job on one machine: the restored state is sharded over both processes' devices,
  every run's rows are written once (by process 0), and the final checkpoint is saved jointly."""
  _assert_rows_close(runs["to2x2"], runs["ref"])
  assert runs["to2x2_steps"] == [50, 100]


def test_padding_repeats_the_last_run_and_counts_round_up():
  assert [sharding.padded_count(r, SimpleNamespace(size=4)) for r in (1, 3, 4, 5)] == [4, 4, 4, 8]
  assert sharding.padded_count(3, SimpleNamespace(size=1)) == 3
  tree = {"a": np.arange(6).reshape(3, 2), "k": jax.random.split(jax.random.key(0), 3)}
  padded = sharding.pad(tree, 5)
  np.testing.assert_array_equal(padded["a"], [[0, 1], [2, 3], [4, 5], [4, 5], [4, 5]])
  np.testing.assert_array_equal(jax.random.key_data(padded["k"]),
                                np.asarray(jax.random.key_data(tree["k"]))[[0, 1, 2, 2, 2]])
  assert sharding.pad(tree, 3)["a"] is tree["a"]  # nothing to pad: no copy


def test_passes_over_four_devices_write_the_rows_of_one_device(runs):
  """The standalone evaluate and probe passes shard the restored runs over the devices (3 runs
  padded to 4) and write exactly the rows of a one-device pass, once."""
  one, four = runs["passes1"], runs["passes4"]
  for kind in ("eval", "probe"):
    assert {r["run"] for r in four[kind]} == {0, 1, 2}
    _assert_rows_close(four[kind], one[kind])
  written = metric_writer.read_rows(os.path.join(runs["p4_dir"], "eval.jsonl"))
  assert len(written) == len(four["eval"]) == 3 * 2  # checkpoints 50 and 100, no padding rows
