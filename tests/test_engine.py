"""The engine's contract (training/loop.py): a new family is `init_one` + `step` + a config.

A toy family (least squares toward a planted weight vector per run) goes through the engine
with nothing else: runs stacked and jitted, rows and checkpoints written, evaluations when due,
resume equal to an uninterrupted run, each stacked run equal to the same run alone, a bad
`train` section refused before the workdir exists."""

import dataclasses
import functools
import os

import flax.struct
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from compgen_jax import checkpointing, metric_writer, rng
from compgen_jax import workdir as workdir_lib
from compgen_jax.training import chunk as chunk_lib
from compgen_jax.training import loop
from compgen_jax.training import passes as engine_passes
from compgen_jax.training.config import train_config, validate_train
from compgen_jax.types import ConfigError

jax.config.update("jax_numpy_rank_promotion", "raise")
DIM, BATCH = 8, 16


@flax.struct.dataclass
class ToyState:
  step: jax.Array
  key: jax.Array      # raw key data (orbax stores no typed keys)
  params: dict
  opt_state: optax.OptState
  target: jax.Array   # the run's planted weights [DIM]


def toy_config(**train) -> ml_collections.ConfigDict:
  cfg = ml_collections.ConfigDict({"seed": 0, "learning_rate": 0.05})
  cfg.train = train_config(**{"num_steps": 60, "batch_size": BATCH, "chunk_size": 20,
                              "log_every": 10, "checkpoint_every": 20, "progress": False,
                              **train})
  return cfg


@functools.cache
def toy_functions(learning_rate: float):
  """(init_one, step, evaluators): one object each per setting, as the contract asks."""
  opt = optax.sgd(learning_rate)

  def init_one(key, target):
    params = {"w": jnp.zeros((DIM,), jnp.float32)}
    return ToyState(step=jnp.zeros((), jnp.int32), key=jax.random.key_data(key), params=params,
                    opt_state=opt.init(params), target=target)

  def step(state):
    key = rng.step_key(jax.random.wrap_key_data(state.key), state.step)
    x = jax.random.normal(key, (BATCH, DIM))

    def loss_fn(params):
      return jnp.mean((x @ params["w"] - x @ state.target) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(state.params)
    updates, opt_state = opt.update(grads, state.opt_state)
    return (state.replace(step=state.step + 1, params=optax.apply_updates(state.params, updates),
                          opt_state=opt_state), {"train/loss": loss})

  def distance(state):
    return {"eval/distance": jnp.linalg.norm(state.params["w"] - state.target)}

  return init_one, step, {"distance": distance}


def toy_family(cfg, num_runs: int = 3) -> loop.Family:
  init_one, step, evaluators = toy_functions(cfg.learning_rate)
  keys = jnp.stack([rng.run_key(cfg.seed, s) for s in range(num_runs)])
  targets = jax.random.normal(jax.random.key(7), (num_runs, DIM))
  return loop.Family(grid=[{"run": r, "seed": r} for r in range(num_runs)], init_one=init_one,
                     inputs=(keys, targets), step=step, evaluators=evaluators,
                     due=lambda s: ("distance",) if s % 40 == 0 or s == cfg.train.num_steps
                     else ())


def test_a_toy_family_trains_through_the_engine(tmp_path):
  cfg = toy_config()
  final = loop.run(toy_family(cfg), cfg, str(tmp_path))
  rows = metric_writer.read_rows(str(tmp_path / workdir_lib.METRICS_FILE))
  assert [r["step"] for r in rows if r["run"] == 0] == list(range(10, 61, 10))
  assert [r["run"] for r in final] == [0, 1, 2] and all(r["step"] == 60 for r in final)
  # evaluations exactly when due: step 40 and the last step
  assert [r["step"] for r in rows if "eval/distance" in r and r["run"] == 0] == [40, 60]
  first = {r["run"]: r["train/loss"] for r in rows if r["step"] == 10}
  assert all(f["train/loss"] < 0.05 * first[f["run"]] for f in final)  # it learns
  # the loss falls toward the planted weights, and the engine's evaluator agrees
  assert all(f["eval/distance"] < 0.3 for f in final)
  assert checkpointing.available_steps(str(tmp_path / workdir_lib.CHECKPOINT_DIR)) == [20, 40, 60]
  assert workdir_lib.load_config(str(tmp_path)).learning_rate == cfg.learning_rate


def test_toy_resume_equals_uninterrupted(tmp_path):
  cfg = toy_config(max_checkpoints=5)
  full, part = str(tmp_path / "full"), str(tmp_path / "part")
  loop.run(toy_family(cfg), cfg, full)
  loop.run(toy_family(cfg), cfg, part, stop_after=20)
  assert checkpointing.available_steps(os.path.join(part, workdir_lib.CHECKPOINT_DIR)) == [20]
  loop.run(toy_family(cfg), cfg, part)
  read = lambda d: open(os.path.join(d, workdir_lib.METRICS_FILE)).read()  # noqa: E731
  assert read(part) == read(full)


@pytest.mark.parametrize("strategy", ["vmap", "map"])
def test_toy_stacked_run_equals_solo_run(strategy):
  cfg = toy_config()
  family = toy_family(cfg)
  chunk = chunk_lib.make_chunk(family.step, 20, strategy)
  stacked, metrics, finite = chunk(loop.jitted_init(family.init_one)(*family.inputs))
  solo = family.init_one(*(jax.tree.map(lambda a: a[2], family.inputs)))
  solo, solo_metrics, solo_finite = jax.jit(functools.partial(
      chunk_lib.scan_one_run, step=family.step, length=20))(solo)
  assert metrics["train/loss"].shape == (3, 20) and bool(np.all(finite)) and bool(solo_finite)
  np.testing.assert_allclose(stacked.params["w"][2], solo.params["w"], rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(metrics["train/loss"][2], solo_metrics["train/loss"], rtol=1e-6)


def test_bad_train_section_is_refused_naming_the_field():
  # the applications' validate call it (once, before anything is written); loop.run trusts it
  for bad, field in (({"log_every": 7}, "train.log_every"),
                     ({"num_steps": 50}, "train.num_steps"),
                     ({"writers": ("tensorboard",)}, "train.writers"),
                     ({"max_checkpoints": 0}, "train.max_checkpoints")):
    with pytest.raises(ConfigError, match=field):
      validate_train(toy_config(**bad).train)


def test_toy_early_stop_ends_at_the_first_accepted_evaluation_and_stays_ended(tmp_path):
  """family.stops: training ends at the first evaluation it accepts (the step checkpointed,
  though checkpoint_every does not fall there), a re-run trains no further, and a run killed
  before the stop resumes to the same rows. The reference is an uninterrupted run's own
  evaluations: the stop belongs at the first step where every run's distance is below t."""
  cfg = toy_config(num_steps=100, checkpoint_every=80, max_checkpoints=5)
  every20 = lambda s: ("distance",) if s % 20 == 0 else ()  # noqa: E731
  full = dataclasses.replace(toy_family(cfg), due=every20)
  loop.run(full, cfg, str(tmp_path / "full"))
  rows = metric_writer.read_rows(str(tmp_path / "full" / workdir_lib.METRICS_FILE))
  worst = {s: max(r["eval/distance"] for r in rows if r["step"] == s) for s in (20, 40, 60)}
  assert worst[20] > worst[40] > worst[60]  # still falling: a threshold picks one step
  t = (worst[40] + worst[60]) / 2  # below at 60 and not before
  stopping = dataclasses.replace(full, stops=lambda ev: bool((ev["eval/distance"] < t).all()))
  metrics = lambda d: tmp_path / d / workdir_lib.METRICS_FILE  # noqa: E731
  final = loop.run(stopping, cfg, str(tmp_path / "stop"))
  assert [r["step"] for r in final] == [60, 60, 60]
  got = metric_writer.read_rows(str(metrics("stop")))
  assert got == [r for r in rows if r["step"] <= 60]
  ckpts = str(tmp_path / "stop" / workdir_lib.CHECKPOINT_DIR)
  assert checkpointing.available_steps(ckpts) == [60]
  assert loop.stopped(stopping, str(metrics("stop")), 60)
  assert not loop.stopped(stopping, str(metrics("stop")), 40)
  again = loop.run(stopping, cfg, str(tmp_path / "stop"))  # ended: nothing more
  assert again == final and metric_writer.read_rows(str(metrics("stop"))) == got
  assert checkpointing.available_steps(ckpts) == [60]
  cfg20 = toy_config(num_steps=100, checkpoint_every=20, max_checkpoints=5)
  loop.run(stopping, cfg20, str(tmp_path / "killed"), stop_after=40)  # before the stop
  loop.run(stopping, cfg20, str(tmp_path / "killed"))
  assert metric_writer.read_rows(str(metrics("killed"))) == got


def test_runs_states_are_restored_in_one_place():
  # loop.restore: the loop's resume and every application's passes restore runs' states through
  # it (lm/gemma2.py's checkpointing.restore reads its cache of converted HF weights, no run's)
  root = os.path.join(os.path.dirname(os.path.dirname(__file__)), "compgen_jax")
  found = sorted(os.path.relpath(os.path.join(d, name), root)
                 for d, _, names in os.walk(root) for name in names if name.endswith(".py")
                 and "checkpointing.restore(" in open(os.path.join(d, name)).read())
  assert found == ["lm/gemma2.py", "training/loop.py"]


def test_a_pass_over_checkpoints_equals_the_function_of_each_restored_run(tmp_path):
  # the engine's pass: every checkpoint restored, the one-run function vmapped (sharded, or on
  # one device), one row per run and step with the grid fields; checked against numpy on the
  # restored states, and the training loop's own evaluation of the last step
  cfg = toy_config()
  family = toy_family(cfg)
  final = loop.run(family, cfg, str(tmp_path))
  target_sum = lambda state: {"w_dot_target": jnp.sum(state.params["w"] * state.target)}
  for placement in engine_passes.PLACEMENTS:
    rows = engine_passes.over_checkpoints(
        str(tmp_path), family.init_one, family.inputs, family.grid,
        {"dot": target_sum, **family.evaluators}, "pass.jsonl", every=True, placement=placement)
    assert [(r["step"], r["run"], r["seed"]) for r in rows] == [
        (s, r, r) for s in (20, 40, 60) for r in range(3)]
    for s in (20, 40, 60):
      _, state = loop.restore(str(tmp_path), family.init_one, family.inputs, s)
      want = np.sum(np.asarray(state.params["w"]) * np.asarray(state.target), axis=1)
      np.testing.assert_allclose([r["w_dot_target"] for r in rows if r["step"] == s], want,
                                 rtol=1e-6)
    assert [r["eval/distance"] for r in rows if r["step"] == 60] == [
        f["eval/distance"] for f in final]
    assert metric_writer.read_rows(str(tmp_path / "pass.jsonl")) == rows  # replaced, not added
