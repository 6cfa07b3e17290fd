"""lm_train's fine-tuning recipes (recipes.py): low-rank adapters against their closed forms
(r * (m + n) trainable entries per matrix, equal to the start at init, W + alpha/r A B), the KL
penalty against a float64 numpy computation, replay's batch mix, decay toward the start against
AdamW's formula, and each recipe changing a real fine-tune the way it should."""

import json
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.llm_data import build
from compgen_jax.lm import gemma2, hf_export
from compgen_jax.lm.model import forward
from compgen_jax.lm_train import data, experiment, family, llm_corpus, recipes
from compgen_jax.lm_train import model as model_lib
from compgen_jax.types import ConfigError
from tests.helpers import load_config

pytestmark = pytest.mark.xdist_group("lm_train_recipes")  # one worker exports the start


def _finetune(**fields) -> ml_collections.ConfigDict:
  f = recipes.default_config()
  f.update(fields)
  return f


def _shapes():
  cfg = load_config("lm_train", "test")
  return model_lib.gemma_config(cfg.model), gemma2.param_shapes(model_lib.gemma_config(cfg.model))


def test_an_adapter_of_rank_r_trains_r_times_m_plus_n_entries_and_starts_at_the_base():
  c, shapes = _shapes()
  start = model_lib.init_params(c, jax.random.key(0), 0.02)
  d, h, g, k, f = c.width, c.num_heads, c.num_kv_heads, c.head_dim, c.mlp_dim
  # each projection as Hugging Face's Linear sees it: (in, out)
  dims = {"q": (d, h * k), "k": (d, g * k), "v": (d, g * k), "o": (h * k, d), "gate": (d, f),
          "up": (d, f), "down": (f, d)}
  for rank in (1, 3):
    ft = _finetune(lora_rank=rank)
    lora = recipes.init_lora(jax.random.key(1), shapes, ft)
    assert set(lora) == set(dims)
    for name, (m, n) in dims.items():
      size = sum(leaf.size for leaf in jax.tree.leaves(lora[name]))
      assert size == c.num_layers * rank * (m + n)
    merged = recipes.merge(start, lora, ft)
    for got, want in zip(jax.tree.leaves(merged), jax.tree.leaves(start), strict=True):
      np.testing.assert_array_equal(got, want)  # B = 0: the start exactly
  # a target list narrows the adapters
  assert set(recipes.init_lora(jax.random.key(1), shapes, _finetune(
      lora_rank=2, lora_targets=("q", "down")))) == {"q", "down"}


def test_merge_is_w_plus_alpha_over_r_times_a_b_in_each_layers_matrix_view():
  c, shapes = _shapes()
  start = model_lib.init_params(c, jax.random.key(0), 0.02)
  ft = _finetune(lora_rank=2, lora_alpha=6.0)
  lora = jax.tree.map(lambda a: jax.random.normal(jax.random.key(a.size), a.shape),
                      recipes.init_lora(jax.random.key(1), shapes, ft))
  merged = recipes.merge(start, lora, ft)
  inputs = {"q": 1, "k": 1, "v": 1, "o": 2, "gate": 1, "up": 1, "down": 1}
  for name, ab in lora.items():
    w = np.asarray(start["layers"][name], np.float64)
    for layer in range(c.num_layers):
      a, b = (np.asarray(ab[x][layer], np.float64) for x in "ab")
      shape = w.shape[1:]
      matrix = w[layer].reshape(int(np.prod(shape[:inputs[name]])), -1)
      want = (matrix + 3.0 * a @ b).reshape(shape)
      np.testing.assert_allclose(merged["layers"][name][layer], want, rtol=1e-5, atol=1e-6)
  for name in ("attn_norm", "post_mlp_norm"):  # no adapters on the norms
    np.testing.assert_array_equal(merged["layers"][name], start["layers"][name])
  np.testing.assert_array_equal(merged["embed"], start["embed"])


def test_the_kl_penalty_is_the_mean_weighted_kl_of_numpy_float64():
  rng = np.random.default_rng(0)
  p_logits, q_logits = (rng.normal(size=(3, 5, 11)) * 3 for _ in range(2))
  weight = (rng.random((3, 5)) < 0.6).astype(np.float32)
  logp = p_logits - np.log(np.exp(p_logits).sum(-1, keepdims=True))
  logq = q_logits - np.log(np.exp(q_logits).sum(-1, keepdims=True))
  kl = (np.exp(logp) * (logp - logq)).sum(-1)
  want = (kl * weight).sum() / weight.sum()
  got = recipes.mean_kl(jnp.asarray(p_logits, jnp.float32), jnp.asarray(q_logits, jnp.float32),
                        jnp.asarray(weight))
  np.testing.assert_allclose(got, want, rtol=1e-5)
  assert float(recipes.mean_kl(jnp.asarray(p_logits), jnp.asarray(p_logits),
                               jnp.asarray(weight))) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("replay", [0.25, 0.5])
def test_replays_batch_mix_is_the_fraction(replay):
  cfg = load_config("lm_train", "test", **{"finetune.replay": replay, "train.batch_size": 8})
  skill = data.Packed(np.full((20, 6), 5, np.int32), np.ones((20, 6), np.float32))
  background = data.Packed(np.full((30, 6), 7, np.int32), np.ones((30, 6), np.float32))
  c = family.Consts(skill, skill, replay=background)
  for step in range(5):
    tokens, weight = family.draw(jax.random.key(step), c, cfg)
    assert tokens.shape == weight.shape == (8, 6)
    assert (tokens[:, 0] == 7).sum() == round(replay * 8) == recipes.replay_rows(cfg)
    np.testing.assert_array_equal(tokens[:8 - round(replay * 8)], 5)  # the skill's rows first


def test_decay_to_init_decays_toward_the_start_by_adamws_formula():
  cfg = load_config("lm_train", "test", **{"finetune.decay_to": "init"})
  c, _ = _shapes()
  start = model_lib.init_params(c, jax.random.key(0), 0.02)
  params = model_lib.init_params(c, jax.random.key(1), 0.5)
  opt = family.optimizer(cfg)
  state = opt.init(params)
  state.hyperparams["learning_rate"] = jnp.asarray(0.5)
  zero = jax.tree.map(jnp.zeros_like, params)
  for decay_to, target in (("init", start), ("zero", jax.tree.map(jnp.zeros_like, start))):
    ft = _finetune(decay_to=decay_to)
    updates, _ = opt.update(zero, state, recipes.decay_reference(params, start, ft))
    # a zero-gradient AdamW step: -lr * wd * (w - target) where decay applies, 0 on the norms
    for path, u, w, w0 in zip(jax.tree_util.tree_leaves_with_path(updates),
                              jax.tree.leaves(updates), jax.tree.leaves(params),
                              jax.tree.leaves(target), strict=True):
      decayed = not jax.tree_util.keystr(path[0]).endswith("norm']")
      want = -0.5 * cfg.optim.weight_decay * (np.asarray(w, np.float64) - np.asarray(w0))
      np.testing.assert_allclose(u, want if decayed else 0.0, rtol=1e-5, atol=1e-8)


@pytest.fixture(scope="module")
def start(tiny_llm_data, tmp_path_factory):
  """(data directory, the start's export, its params): a training-initialised test-size model
  on the tiny data's tokenizer, exported as every background is."""
  data_dir = tiny_llm_data[1]
  cfg = load_config("lm_train", "test_expert_arith", **{"corpus.data_dir": data_dir})
  c = model_lib.gemma_config(cfg.model)
  params = model_lib.init_params(c, jax.random.key(7), 0.02)
  export = str(tmp_path_factory.mktemp("recipes") / "start")
  hf_export.write(export, c, jax.tree.map(np.asarray, params),
                  os.path.join(data_dir, build.TOKENIZER))
  return data_dir, export, params


def _expert(start, **overrides) -> ml_collections.ConfigDict:
  data_dir, export, _ = start
  return load_config("lm_train", "test_expert_arith", **{
      "init_from": export, "corpus.data_dir": data_dir, "train.num_steps": 20,
      "train.checkpoint_every": 20, "evals.every": 20, "optim.learning_rate": 3e-2,
      "optim.warmup_steps": 2, **overrides})


def _trained(cfg, workdir) -> dict:
  experiment.train(cfg, workdir)
  return jax.tree.map(lambda a: np.asarray(a[0], np.float64),
                      experiment.trained_params(cfg, workdir))


def _replay_kl(cfg, params, start_params) -> float:
  """Mean KL(p || p_start) over the replay rows (numpy, float64, from both models' logits)."""
  model = gemma2.make_model(model_lib.gemma_config(cfg.model))
  docs, masks = llm_corpus.replay_documents(cfg)
  rows = data.pack(docs, cfg.corpus.seq_len, masks)
  tokens, weight = rows.tokens_NxL[:64], rows.weight_NxL[:64, 1:]
  logits = [np.asarray(forward(model, jax.tree.map(jnp.asarray, p), tokens[:, :-1]), np.float64)
            for p in (params, start_params)]
  logp, logq = (x - np.log(np.exp(x).sum(-1, keepdims=True)) for x in logits)
  return float(((np.exp(logp) * (logp - logq)).sum(-1) * weight).sum() / weight.sum())


def test_each_recipe_changes_a_fine_tune_as_it_should(start, tmp_path):
  start_params = jax.tree.map(lambda a: np.asarray(a, np.float64), start[2])
  full_cfg = _expert(start, **{"finetune.replay": 0.5})
  full = _trained(full_cfg, str(tmp_path / "replay"))
  kl_cfg = _expert(start, **{"finetune.replay": 0.5, "finetune.kl": 3.0})
  kl = _trained(kl_cfg, str(tmp_path / "kl"))
  rows = metric_writer.read_rows(str(tmp_path / "kl" / workdir_lib.METRICS_FILE))
  assert all(r["train/loss"] == pytest.approx(r["train/ce"] + 3.0 * r["train/kl"], rel=1e-4)
             for r in rows)
  # the penalty keeps the expert nearer the start on the background's text
  assert _replay_kl(kl_cfg, kl, start_params) < 0.5 * _replay_kl(full_cfg, full, start_params)

  # low-rank adapters: each layer's change of each matrix has rank <= r; only they train
  rank = 2
  lora_cfg = _expert(start, **{"finetune.lora_rank": rank})
  lora = _trained(lora_cfg, str(tmp_path / "lora"))
  c = model_lib.gemma_config(lora_cfg.model)
  inputs = {"q": 1, "k": 1, "v": 1, "o": 2, "gate": 1, "up": 1, "down": 1}
  for name, axes in inputs.items():
    for layer in range(c.num_layers):
      delta = lora["layers"][name][layer] - start_params["layers"][name][layer]
      matrix = delta.reshape(int(np.prod(delta.shape[:axes])), -1)
      s = np.linalg.svd(matrix, compute_uv=False)
      assert s[0] > 1e-4 and (s[rank:] < 1e-5 * s[0]).all(), (name, layer, s[:rank + 2])
  for name in ("embed", "final_norm"):
    np.testing.assert_allclose(lora[name], start_params[name], atol=1e-7)
  with open(tmp_path / "lora" / workdir_lib.PARAMS_FILE) as f:
    trainable = json.load(f)["student"]
  assert trainable == sum(c.num_layers * rank * (
      np.prod(start_params["layers"][n].shape[1:1 + a]) +
      np.prod(start_params["layers"][n].shape[1 + a:])) for n, a in inputs.items())
  # the export is the merged model: gemma2.load reads a plain checkpoint with those weights
  _, exported = gemma2.load(experiment.export_dir(str(tmp_path / "lora"), 0))
  for got, want in zip(jax.tree.leaves(exported), jax.tree.leaves(lora), strict=True):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

  # decay toward the start ends nearer it than decay toward zero, with everything else equal
  dist = lambda p: sum(float(np.sum((a - b) ** 2)) for a, b in zip(  # noqa: E731
      jax.tree.leaves(p), jax.tree.leaves(start_params), strict=True))
  # (a decay step of lr * wd = 5 % against Adam's steps of about lr: the decay dominates)
  strong = {"optim.weight_decay": 50.0, "optim.learning_rate": 1e-3}
  to_zero = _trained(_expert(start, **strong), str(tmp_path / "zero"))
  to_init = _trained(_expert(start, **strong, **{"finetune.decay_to": "init"}),
                     str(tmp_path / "init"))
  assert dist(to_init) < 0.5 * dist(to_zero)


@pytest.mark.parametrize("overrides, field", [
    ({"finetune.kl": 1.0}, "finetune.kl"),  # measured on replay rows: none
    ({"finetune.replay": 0.01}, "finetune.replay"),  # rounds to no row
    ({"finetune.replay": 1.0}, "finetune.replay"),
    ({"finetune.replay": 0.5, "finetune.replay_sources": ("arith",)}, "finetune.replay_sources"),
    ({"finetune.lora_rank": 2, "finetune.decay_to": "init"}, "finetune.decay_to"),
    ({"finetune.decay_to": "half"}, "finetune.decay_to"),
    ({"finetune.lora_targets": ("q", "embed")}, "finetune.lora_targets"),
    ({"finetune.lora_rank": 2, "init_from": ""}, "init_from"),
])
def test_bad_recipes_are_refused_before_anything_is_written(start, overrides, field, tmp_path):
  cfg = _expert(start, **overrides)
  with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
    experiment.train(cfg, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


def test_replay_rows_hold_out_each_sources_held_out_documents(start):
  cfg = _expert(start, **{"finetune.replay": 0.5})
  replayed = set(map(tuple, llm_corpus.replay_documents(cfg)[0]))
  for source in cfg.finetune.replay_sources:
    (train, _), (held, _) = llm_corpus.source_documents(cfg, source)
    assert held and not replayed & set(map(tuple, held))
    assert set(map(tuple, train)) <= replayed
