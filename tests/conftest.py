"""Test settings shared by every module: strict rank promotion, CPU, fast compiles.

The tests' models are tiny, so XLA's backend optimisation costs far more time (compiling) than it
saves (running); the persistent compilation cache lets pytest workers and the binaries the smoke
tests launch reuse each other's programs. Both are set in the environment so subprocesses inherit
them.
"""

import os
import tempfile

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_backend_optimization_level=0").strip()
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR",
                      os.path.join(tempfile.gettempdir(), "compgen_jax_test_jit_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")

import jax  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "raise")


TINY_SWEEP = "configs/sweeps/data_scaling.py:tiny"


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory) -> str:
  """The tiny data-scaling sweep (2 programs x 4 runs, 100 steps), run and probed once per
  session; tests read it or copy it, never write into it."""
  from compgen_jax.sweeps import launch  # here: most test modules never need the launcher
  from tests.helpers import REPO

  sweep_dir = str(tmp_path_factory.mktemp("tiny_sweep") / "data_scaling")
  assert launch.run_sweep(os.path.join(REPO, TINY_SWEEP), sweep_dir, probe=True) == []
  return sweep_dir
