"""Test settings shared by every module: strict rank promotion, CPU, fast compiles.

The tests' models are tiny, so XLA's backend optimisation costs far more time (compiling) than it
saves (running); the flag is set in the environment so the binaries the smoke tests launch inherit
it.

A pytest worker lives for the whole suite, and workers have segfaulted inside XLA late in a run
(CI: reading an executable back from the persistent compilation cache; here: compiling, without
the cache), after some 550 tests, when a worker that keeps every compiled program has grown by
about 15 MB a test. Cause not found, so: no persistent cache (no executable compiled in one process
is loaded into another), every module ends by dropping JAX's compiled programs (a worker's memory
about halves), and `make test` passes --max-worker-restart=0 (a crash fails the run at once
instead of hanging it: tests/test_xdist_groups.py).
"""

import gc
import os

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_backend_optimization_level=0").strip()
os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)  # a user's cache is not the tests' either

import jax  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "raise")


TINY_SWEEP = "configs/sweeps/data_scaling.py:tiny"


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_programs_after_each_module():
  """Set up before, so torn down after, the module's own fixtures."""
  yield
  jax.clear_caches()
  gc.collect()


def pytest_collection_modifyitems(items):
  """Modules marked `heavy` (a test or fixture of 30 s or more) run first: pytest-xdist hands
  tests out in collection order, so a long one collected last would keep one worker busy while
  the other has nothing left (the sort is stable, and the same on every worker)."""
  items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory) -> str:
  """The tiny data-scaling sweep (2 programs x 4 runs, 100 steps), run and probed once per
  session; tests read it or copy it, never write into it."""
  from compgen_jax.sweeps import launch  # here: most test modules never need the launcher
  from tests.helpers import REPO

  sweep_dir = str(tmp_path_factory.mktemp("tiny_sweep") / "data_scaling")
  assert launch.run_sweep(os.path.join(REPO, TINY_SWEEP), sweep_dir, probe=True) == []
  return sweep_dir


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
  """Three tiny random LLM checkpoints (base, two noisy experts), the tiny config pointing at
  them, and their loaded form: built once per worker; tests copy the config before changing it."""
  from compgen_jax.llm_eval import systems, tiny  # here: most test modules never need them
  from tests.helpers import llm_config

  cfg = llm_config()
  d = str(tmp_path_factory.mktemp("models"))
  texts = ["Question: what is 2 + 3?\nAnswer: 5", "def add(a, b):\n    return a + b"] * 20
  paths = tiny.ensure_models(d, cfg.tiny_models, ["base", "math", "coding"], texts, 0)
  with cfg.unlocked():
    cfg.models.update(paths)
  loaded = systems.load(cfg, paths, ["base", "math", "coding"], str(tmp_path_factory.mktemp("w")))
  return cfg, paths, loaded


@pytest.fixture(scope="session")
def tiny_llm_data(tmp_path_factory):
  """(config, directory) of llm_data's tiny preset, built once per worker; tests read it, never
  write into it."""
  from compgen_jax.llm_data import build, config  # here: most test modules never need them

  cfg = config.data_config("tiny")
  directory = str(tmp_path_factory.mktemp("llm_data") / "data")
  build.ensure(cfg, directory)
  return cfg, directory
