"""The letter experiments: config validation, the binary's error paths, the registry, evaluation
helpers, and a tiny run end to end."""

import json
import os
import subprocess
import sys

import jax
import ml_collections
import numpy as np
import pytest

from compgen_jax import apps, checkpointing, workdir
from compgen_jax.composition import spec
from compgen_jax.letters import checks, config, data, evaluate, registry, runner, standalone, zoo
from compgen_jax.letters.context import Ctx
from compgen_jax.lm.model import uniform_model
from compgen_jax.types import ConfigError
from tests.helpers import REPO, load_config

pytestmark = pytest.mark.heavy  # collected first (tests/conftest.py)

jax.config.update("jax_numpy_rank_promotion", "raise")


def _cfg(**overrides):
  return load_config("letters", "tiny", **overrides)


@pytest.mark.parametrize("overrides,field", [
    ({"experiments": ("substitution", "bogus")}, "experiments"),
    ({"experiments": ("substitution,length",)}, "experiments"),  # a comma string, not a tuple
    ({"compose.pairs": (("A>B", "C>7"),)}, "compose.pairs"),
    ({"compose.pairs": ("A>B,C>D",)}, "compose.pairs"),
    ({"compose.lambdas": (1.0, 1.0, 1.0)}, "compose.lambdas"),
    ({"compose.ta_lambdas": (0.5, -1.0)}, "compose.ta_lambdas"),
    ({"compose.k_experts": ("A>B", "B>C"), "compose.k_max": 2}, "compose.k_experts"),
    ({"compose.k_max": 9}, "compose.k_max"),
    ({"data.layout": "zigzag"}, "data.layout"),
    ({"model.positions": "learned", "model.max_len": 16}, "data.length_max"),
    ({"finetune.regimes": ("head", "top7")}, "finetune.regimes"),
    ({"train.chunk_size": 7}, "train.chunk_size"),
    ({"finetune.train.chunk_size": 7}, "finetune.train.chunk_size"),
    ({"optim.learning_rate": 0.0}, "optim.learning_rate"),
    ({"train.batch_size": 0}, "train.batch_size"),  # each field named, not its neighbour's
    ({"finetune.optim.warmup_steps": -1}, "finetune.optim.warmup_steps"),
    ({"model.mlp_ratio": 0}, "model.mlp_ratio"),
    ({"data.num_train": -1}, "data.num_train"),
    ({"compose.eval_batch": 0}, "compose.eval_batch"),
    ({"compose.pairs": (("A>K", "A>B"),)}, "compose.pairs"),
    ({"init": "tied"}, "init"),
    ({"model.init": "xavier"}, "model.init"),
    ({"compose.mask": "nucleus"}, "compose.mask"),
    ({"compose.mask_p": 1.5}, "compose.mask_p"),
    ({"compose.gate": "kl", "compose.gate_tau": -0.1}, "compose.gate_tau"),
    ({"compose.eos": "first"}, "compose.eos"),
    ({"compose.operator": "authors", "compose.lambdas": (1.0, 1.0)}, "compose.lambdas"),
    ({"compose.operator": "authors"}, "compose.operator"),  # tiny runs k_experts
    ({"compose.greedy": False, "compose.top_p": 0.0}, "compose.top_p"),
    ({"compose.greedy": False, "compose.top_k": -1}, "compose.top_k"),
    ({"compose.eos": "min", "data.layout": "position"}, "compose.eos"),
])
def test_bad_config_is_refused_naming_the_field(overrides, field):
  with pytest.raises(ConfigError) as e:
    config.validate(_cfg(**overrides))
  assert e.value.field == field


def test_presets_registry_and_config_agree():
  for preset in ("authors", "paper", "quick", "tiny"):
    config.validate(load_config("letters", preset))
  # every experiment but the opt-in k_baselines (a joint model per k), which validates when named
  assert _cfg().experiments == tuple(e for e in registry.EXPERIMENTS if e != "k_baselines")
  config.validate(_cfg(experiments=tuple(registry.EXPERIMENTS)))
  # the authors build every model with its own random init (GPT2LMHeadModel(config) x 3)
  assert load_config("letters", "paper").init == "independent"
  with pytest.raises(ValueError, match="preset"):
    load_config("letters", "huge")


def _train_binary(tmp_path, *overrides):
  return subprocess.run(
      [sys.executable, os.path.join(REPO, "experiments", "train.py"),
       "--config=" + os.path.join(REPO, "configs", "letters.py") + ":tiny",
       *overrides, f"--workdir={tmp_path}"],
      capture_output=True, text=True, cwd=REPO, timeout=120)


@pytest.mark.parametrize("override,words", [
    ("--config.compose.pairs=(('A>B','C>%'),)", ("compose.pairs", data.LETTERS)),
    ("--config.train.steps=100", ("unknown field 'steps'", "num_steps")),
])
def test_binary_refuses_bad_and_unknown_fields_in_one_line(tmp_path, override, words):
  proc = _train_binary(tmp_path, override)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr[-2000:]
  assert all(w in proc.stderr for w in words), proc.stderr
  assert not os.listdir(tmp_path)  # refused before anything was written


def test_tiny_letter_experiment_composes_and_restores(tmp_path):
  cfg = _cfg(num_seeds=1, experiments=("substitution",))
  wd = str(tmp_path / "run")
  rows = runner.run(cfg, wd)["substitution"]
  assert len(rows) == 1 and rows[0]["exact_match"] >= 0.95, rows
  assert rows[0]["overlap"] == 0.0 and rows[0]["mean_abs_log_z"] < 0.1
  with open(os.path.join(wd, "substitution", "results.jsonl")) as f:
    assert json.loads(f.readline())["pair"] == "A>B,C>D"
  assert os.path.exists(os.path.join(wd, "substitution", "plot.png"))
  # the scratch phase is a loop workdir: a checkpoint per chunk (the last two kept)
  assert checkpointing.available_steps(os.path.join(wd, "scratch", "checkpoints")) == [75, 150]
  # ... whose config.json is the letters config itself, not a phase-made one
  assert (workdir.load_config(os.path.join(wd, "scratch")).to_dict()
          == workdir.load_config(wd).to_dict())
  assert apps.of_workdir(os.path.join(wd, "scratch"))[0].name == "letters"
  assert not [n for n in os.listdir(os.path.join(wd, "substitution")) if n.endswith(".tmp")]
  # a rerun restores the same models instead of training again
  rows2 = runner.run(cfg, wd)["substitution"]
  np.testing.assert_allclose(rows2[0]["exact_match"], rows[0]["exact_match"])
  with pytest.raises(ConfigError, match="different config"):
    workdir.prepare(wd, _cfg(num_seeds=2, experiments=("substitution",)))


def test_models_each_experiment_needs():
  cfg = _cfg()
  assert registry.scratch_tasks(cfg) == ["identity", "A>B", "C>D", "A>B+C>D", "A>B|C>D", "E>F",
                                         "A>K", "K>Z"]
  assert registry.finetune_runs(cfg) == [("A>B", "head"), ("C>D", "head"), ("A>B", "all"),
                                         ("C>D", "all")]
  cfg = _cfg(experiments=("k_experts",))
  assert registry.scratch_tasks(cfg) == ["identity", "A>B", "C>D", "E>F"]
  assert registry.finetune_runs(cfg) == []


def test_readings_of_two_experts():
  r = checks.readings(["A>K", "K>Z"])  # chain: in parallel A->K, K->Z; in sequence A->Z
  a, k, z = (data.SYMBOLS.index(c) for c in "AKZ")
  assert (r["parallel"][a], r["parallel"][k], r["sequential"][a], r["sequential"][k]) == (
      k, z, z, z)
  r = checks.readings(["A>K", "A>B"])  # overlap: no single table, nothing to score against
  assert r["parallel"] is None and r["only_A>K"][a] == k and r["sequential"][a] == k


def test_mean_where_and_sampling_draws_fresh_keys_in_every_chunk():
  em = np.asarray(jax.random.bernoulli(jax.random.key(2), 0.5, (2, 50)), np.float32)
  mask = np.asarray(jax.random.bernoulli(jax.random.key(3), 0.3, (2, 50)))
  np.testing.assert_allclose(evaluate.mean_where(em, mask),
                             [em[s][mask[s]].mean() for s in range(2)])
  assert np.isnan(evaluate.mean_where(em, np.zeros_like(mask))).all()
  # 8 copies of one prompt decoded in 2 chunks of 4 from the uniform model: with one key for
  # every chunk, chunk 2 repeated chunk 1's draws exactly.
  x = np.zeros((1, 8, 6), np.int32)
  ref, forced, _ = evaluate.references(x, np.full((1, 8), 6), data.table([]), "aligned")
  cfg = ml_collections.ConfigDict(dict(compose=dict(greedy=False, temperature=1.0,
                                                    eval_batch=4), data=dict(layout="aligned")))
  uniform = uniform_model(zoo.letter_lm(_cfg().model))
  tokens = evaluate.decode_all(cfg, (uniform,), (None,), ref, forced,
                               seed_keys_S=jax.random.key(0)[None])
  gen = ~np.asarray(forced[0])
  first, second = tokens[0, :4][:, gen[0]], tokens[0, 4:][:, gen[0]]
  assert not np.array_equal(first, second)
  # and every generated token is a draw from the uniform model: all ids occur, none dominates
  assert len(np.unique(tokens[0, :, 2])) >= 6


def _random_zoo(cfg, tasks):
  """Untrained models (one init per task and seed): enough to check what the experiments
  report, not how well."""
  model = zoo.letter_lm(cfg.model)
  seed_keys = jax.vmap(lambda i: jax.random.key(i))(np.arange(cfg.num_seeds))
  init = jax.jit(zoo.initial_params, static_argnums=(0, 2, 3))(model, seed_keys, tuple(tasks),
                                                                "independent")
  s = cfg.num_seeds
  params = {t: jax.tree.map(lambda a, i=i: a[i * s:(i + 1) * s], init)
            for i, t in enumerate(tasks)}
  return zoo.Zoo(model, params, {}, seed_keys)


def test_k_experts_and_violations_report_only_what_is_defined():
  cfg = _cfg(num_seeds=1, experiments=("k_experts", "violations"))
  ctx = Ctx(cfg, _random_zoo(cfg, registry.scratch_tasks(cfg)))
  rows = registry.EXPERIMENTS["k_experts"].run(ctx)
  for r in rows:  # diagnostics of the k experts in use, not of the weight-0 background copies
    assert len(r["active_frac"]) == r["k"]
    assert r["num_all_sources"] == int(data.contains_all_sources(
        ctx.x, ctx.len, r["experts"].split(","))[0].sum())
  assert np.isnan(rows[0]["ortho_cos"])  # k = 1: no pair
  rows = {r["case"]: r for r in registry.EXPERIMENTS["violations"].run(ctx)}
  assert np.isnan(rows["overlap"]["exact_match_parallel"]) and not rows["overlap"][
      "parallel_defined"]
  assert not np.isnan(rows["chain"]["exact_match_parallel"]) and rows["chain"]["parallel_defined"]


def test_init_schemes():
  cfg = _cfg()
  model = zoo.letter_lm(cfg.model)
  keys = jax.vmap(lambda i: jax.random.key(i))(np.arange(2))
  init = jax.jit(zoo.initial_params, static_argnums=(0, 2, 3))
  leaf = lambda p: np.asarray(p["embed"]["embedding"])
  shared, indep = (leaf(init(model, keys, ("identity", "A>B"), scheme))
                   for scheme in ("shared", "independent"))
  np.testing.assert_array_equal(shared[:2], shared[2:])  # task-major: same draw per seed
  assert not np.allclose(shared[0], shared[1])            # seeds differ
  assert not np.allclose(indep[:2], indep[2:]) and not np.allclose(indep[0], indep[1])
  # model.init reaches the models every phase trains from (GPT-2's N(0, 0.02) embeddings
  # instead of flax's 1/sqrt(width) = 0.25 at the tiny width 16)
  gpt2 = zoo.letter_lm(_cfg(**{"model.init": "gpt2"}).model)
  emb = leaf(init(gpt2, keys, ("identity", "A>B"), "independent"))
  assert abs(emb.std() / 0.02 - 1) < 5 / np.sqrt(2 * emb.size)
  assert abs(indep.std() * np.sqrt(16) - 1) < 5 / np.sqrt(2 * indep.size)


def test_the_step_spec_and_sampling_fields_reach_letter_decoding():
  """compose.gate, mask and top_k act in the letters' decoding: a gate above every KL
  decodes the background alone, the mask changes random models' output, top_k = 1 sampling is
  greedy."""
  cfg = _cfg(num_seeds=1)
  z = _random_zoo(cfg, ("identity", "A>B", "C>D"))
  models, params = (z.model,) * 3, tuple(z.params[t] for t in ("identity", "A>B", "C>D"))
  x = np.asarray(jax.random.randint(jax.random.key(4), (1, 16, 6), 0, 26))
  ref, forced, _ = evaluate.references(x, np.full((1, 16), 6), data.table([]), "aligned")

  def decode(models, params, **fields):
    c = _cfg(num_seeds=1, **{f"compose.{k}": v for k, v in fields.items()})
    return evaluate.decode_all(c, models, params, ref, forced, seed_keys_S=z.seed_keys)

  plain = decode(models, params)
  background = decode(models[:1], params[:1])
  assert not np.array_equal(plain, background)
  np.testing.assert_array_equal(decode(models, params, gate="kl", gate_tau=1e9), background)
  assert not np.array_equal(decode(models, params, mask="alpha", mask_alpha=0.9), plain)
  np.testing.assert_array_equal(decode(models, params, greedy=False, top_k=1), plain)
  assert not np.array_equal(decode(models, params, greedy=False, temperature=2.0), plain)


def test_a_workdir_saved_before_the_step_spec_reads_with_its_defaults(tmp_path):
  """evaluate.py over a run saved before compose.operator/mask/gate/eos/top_k/top_p/min_p
  existed: the fields come back with the defaults it decoded with, and validate."""
  saved = workdir.config_dict(_cfg(**{"model.init": "flax"}))
  added = {**spec.spec_fields(), **spec.truncation_fields()}
  for field in added:
    del saved["compose"][field]
  del saved["model"]["init"]  # and before model.init: flax's initialisation
  (tmp_path / workdir.CONFIG_FILE).write_text(json.dumps(saved))
  cfg = standalone.saved_config(str(tmp_path))
  assert {f: cfg.compose[f] for f in added} == added
  assert cfg.model.init == "flax"
  config.validate(cfg)
