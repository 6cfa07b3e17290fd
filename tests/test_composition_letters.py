"""Config validation, the binary's error path, and a tiny letter experiment end to end."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from compgen_jax import checkpointing, workdir
from compgen_jax.composition import checks, evaluate, experiments, letters, lm, runner, suite
from compgen_jax.types import ConfigError
from tests.helpers import REPO, load_config

jax.config.update("jax_numpy_rank_promotion", "raise")

def _cfg(**overrides):
  return load_config("letters", "tiny", **overrides)


@pytest.mark.parametrize("overrides,field", [
    ({"experiments": "substitution,bogus"}, "experiments"),
    ({"compose.pairs": "A>B,C>7"}, "compose.pairs"),
    ({"compose.lambdas": "1,1,1"}, "compose.lambdas"),
    ({"compose.k_experts": "A>B,B>C", "compose.k_max": 2}, "compose.k_experts"),
    ({"compose.k_max": 9}, "compose.k_max"),
    ({"data.layout": "zigzag"}, "data.layout"),
    ({"model.positions": "learned", "model.max_len": 16}, "data.length_max"),
    ({"finetune.regimes": "head,top7"}, "finetune.regimes"),
    ({"train.chunk_steps": 7}, "train.chunk_steps"),
    ({"compose.pairs": "A>K,A>B"}, "compose.pairs"),
])
def test_bad_config_is_refused_naming_the_field(overrides, field):
  with pytest.raises(ConfigError) as e:
    suite.validate(_cfg(**overrides))
  assert e.value.field == field


def test_unknown_preset_and_binary_exit_code(tmp_path):
  with pytest.raises(ValueError, match="preset"):
    load_config("letters", "huge")
  proc = subprocess.run(
      [sys.executable, os.path.join(REPO, "experiments", "compose.py"),
       "--config=" + os.path.join(REPO, "configs", "letters.py") + ":tiny",
       "--config.compose.pairs=A>B,C>%", f"--workdir={tmp_path}"],
      capture_output=True, text=True, cwd=REPO, timeout=120)
  assert proc.returncode != 0
  assert "compose.pairs" in proc.stderr and "ABCDEFGHIJKLMNOPQRSTUVWXYZ" in proc.stderr
  assert not os.listdir(tmp_path)  # refused before anything was written


def test_tiny_letter_experiment_composes_and_restores(tmp_path):
  cfg = _cfg(num_seeds=1, experiments="substitution")
  wd = str(tmp_path / "run")
  rows = runner.run(cfg, wd)["substitution"]
  assert len(rows) == 1 and rows[0]["exact_match"] >= 0.95, rows
  assert rows[0]["overlap"] == 0.0 and rows[0]["mean_abs_log_z"] < 0.1
  with open(os.path.join(wd, "substitution", "results.jsonl")) as f:
    assert json.loads(f.readline())["pair"] == "A>B,C>D"
  assert os.path.exists(os.path.join(wd, "substitution", "plot.png"))
  assert checkpointing.available_steps(os.path.join(wd, "checkpoints", "scratch")) == [1]
  # a rerun restores the same models instead of training again
  zoo = suite.build_zoo(cfg, wd)
  assert set(zoo.params) == {"identity", "A>B", "C>D"}
  rows2 = runner.run(cfg, wd)["substitution"]
  np.testing.assert_allclose(rows2[0]["exact_match"], rows[0]["exact_match"])
  with pytest.raises(ConfigError, match="different config"):
    workdir.prepare(wd, _cfg(num_seeds=2, experiments="substitution"))


def test_strings_containing_every_source_letter():
  x = jax.random.randint(jax.random.key(0), (2, 50, 7), 0, 27)
  ln = jax.random.randint(jax.random.key(1), (2, 50), 1, 8)
  subs = ["A>B", "C>D"]
  got = letters.contains_all_sources(x, ln, subs)
  xs, ns = np.asarray(x), np.asarray(ln)
  want = [[{0, 2} <= set(xs[s, b, :ns[s, b]].tolist()) for b in range(50)] for s in range(2)]
  np.testing.assert_array_equal(got, np.array(want))
  em = np.asarray(jax.random.bernoulli(jax.random.key(2), 0.5, (2, 50)), np.float32)
  want_em = [np.mean([em[s, b] for b in range(50) if want[s][b]]) for s in range(2)]
  np.testing.assert_allclose(evaluate.mean_where(em, got), want_em)
  assert np.isnan(evaluate.mean_where(em, np.zeros_like(got))).all()


def test_readings_of_two_experts():
  r = checks.readings(["A>K", "K>Z"])  # chain: in parallel A->K, K->Z; in sequence A->Z
  a, k, z = (letters.SYMBOLS.index(c) for c in "AKZ")
  assert (r["parallel"][a], r["parallel"][k], r["sequential"][a], r["sequential"][k]) == (
      k, z, z, z)
  r = checks.readings(["A>K", "A>B"])  # overlap: no single table, nothing to score against
  assert r["parallel"] is None and r["only_A>K"][a] == k and r["sequential"][a] == k
  with pytest.raises(ValueError, match="same letter"):
    letters.table(["A>K", "A>B"])


def _random_zoo(cfg, tasks):
  """Untrained models (one init per task and seed): enough to check what the experiments
  report, not how well."""
  model = lm.make_lm(cfg.model, letters.VOCAB_SIZE)
  seed_keys = jax.vmap(lambda i: jax.random.key(i))(np.arange(cfg.num_seeds))
  init = suite.initial_params(model, seed_keys, tasks, "independent")
  s = cfg.num_seeds
  params = {t: jax.tree.map(lambda a, i=i: a[i * s:(i + 1) * s], init)
            for i, t in enumerate(tasks)}
  return suite.Zoo(model, params, {}, seed_keys)


def test_k_experts_and_violations_report_only_what_is_defined():
  cfg = _cfg(num_seeds=1, experiments="k_experts,violations")
  ctx = experiments.Ctx(cfg, _random_zoo(cfg, suite.scratch_tasks(cfg)))
  rows = experiments.k_experts(ctx)
  for r in rows:  # diagnostics of the k experts in use, not of the weight-0 background copies
    assert len(r["active_frac"]) == r["k"]
    assert r["num_all_sources"] == int(letters.contains_all_sources(
        ctx.x, ctx.len, r["experts"].split(","))[0].sum())
  assert np.isnan(rows[0]["ortho_cos"])  # k = 1: no pair
  rows = {r["case"]: r for r in checks.violations(ctx)}
  assert np.isnan(rows["overlap"]["exact_match_parallel"]) and not rows["overlap"][
      "parallel_defined"]
  assert not np.isnan(rows["chain"]["exact_match_parallel"]) and rows["chain"]["parallel_defined"]


def test_init_schemes():
  cfg = _cfg()
  model = lm.make_lm(cfg.model, letters.VOCAB_SIZE)
  keys = jax.vmap(lambda i: jax.random.key(i))(np.arange(2))
  leaf = lambda p: np.asarray(p["embed"]["embedding"])
  shared, indep = (leaf(suite.initial_params(model, keys, ["identity", "A>B"], scheme))
                   for scheme in ("shared", "independent"))
  np.testing.assert_array_equal(shared[:2], shared[2:])  # task-major: same draw per seed
  assert not np.allclose(shared[0], shared[1])            # seeds differ
  assert not np.allclose(indep[:2], indep[2:]) and not np.allclose(indep[0], indep[1])
  # the authors build every model with its own random init (GPT2LMHeadModel(config) x 3)
  assert load_config("letters", "paper").init == "independent"
  with pytest.raises(ConfigError) as e:
    suite.validate(_cfg(init="tied"))
  assert e.value.field == "init"
