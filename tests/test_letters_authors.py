"""The authors' letter toy (`authors` preset, 'position' layout): the preset's fields, the
position-aligned transducer, and its composition per position on one forward pass."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from compgen_jax.composition import diagnostics
from compgen_jax.letters import claims as letter_claims
from compgen_jax.letters import config, data, evaluate, registry, report_rows, training, zoo
from compgen_jax.letters.context import Ctx
from compgen_jax.lm.model import forward
from compgen_jax.types import ConfigError
from tests.helpers import REPO, load_config

jax.config.update("jax_numpy_rank_promotion", "raise")


def _authors(**overrides):
  return load_config("letters", "authors", **overrides)


def _gpt2_param_count(vocab, positions, width, layers, inner):
  """GPT2LMHeadModel's parameters (tied head), from its layer shapes: wte, wpe, per block
  ln_1, c_attn, c_proj, ln_2, c_fc, mlp c_proj, then ln_f."""
  block = 2 * width + (width * 3 * width + 3 * width) + (width * width + width) + 2 * width + (
      width * inner + inner) + (inner * width + width)
  return vocab * width + positions * width + layers * block + 2 * width


def test_authors_preset_is_the_authors_model_and_training():
  cfg = _authors()
  config.validate(cfg)
  assert cfg.data.layout == "position" and cfg.init == "independent"
  model = zoo.letter_lm(cfg.model, cfg.data.layout)
  params = model.init(jax.random.key(0))
  assert model.vocab_size == 27 == len(data.SYMBOLS)  # 26 letters + space, no specials
  assert "head" not in params and params["embed"]["embedding"].shape == (27, 64)  # tied
  assert params["pos_embed"]["embedding"].shape == (32, 64)  # learned, n_positions=32
  # GPT-2's initialisation (lm/transformer.gpt2_params): positions N(0, 0.02), not flax's 1/8
  pos = np.asarray(params["pos_embed"]["embedding"])
  assert cfg.model.init == "gpt2" and abs(pos.std() / 0.02 - 1) < 5 / np.sqrt(2 * pos.size)
  count = sum(a.size for a in jax.tree.leaves(params))
  assert count == _gpt2_param_count(27, 32, 64, 2, 256)
  # 5 epochs of 2000 strings at batch 1
  assert cfg.train.batch_size * cfg.train.num_steps == 5 * cfg.data.num_train
  assert cfg.data.train_len == cfg.data.train_min_len == 16
  # torch.optim.AdamW(lr=3e-4) defaults: constant rate, weight decay 0.01, no clipping. Two steps
  # on a scalar with a huge gradient follow the AdamW formula unclipped.
  opt = training.make_optimizer(cfg.optim, cfg.train.num_steps)
  p = jnp.float32(1.0)
  state, m, v, want = opt.init(p), 0.0, 0.0, 1.0
  for t, g in enumerate((1e3, -2e3), start=1):
    upd, state = opt.update(jnp.float32(g), state, p)
    p = optax.apply_updates(p, upd)
    m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
    want = want - 3e-4 * ((m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
                          + 0.01 * want)
  np.testing.assert_allclose(float(p), want, rtol=1e-6)


def test_position_layout_targets_sit_at_the_input_position():
  x = jnp.array([[0, 12, 12, 0], [2, 26, 0, 0]])  # "AMMA", "C " (+ padding)
  lens = jnp.array([4, 2])
  y = jnp.take(jnp.asarray(data.table(["A>K", "M>B"])), x)
  tok, forced, target = data.build(x, lens, y, "position")
  assert tok.shape == (2, 8)
  inputs, labels, weight = training.lm_example(tok, target, "position")
  np.testing.assert_array_equal(inputs[0], x[0])      # the model reads x only, unshifted
  np.testing.assert_array_equal(labels[0], y[0])      # and is scored on y_t at position t
  np.testing.assert_array_equal(weight, [[1, 1, 1, 1], [1, 1, 0, 0]])
  assert data.to_text(np.asarray(labels[0])) == "KBBK"
  np.testing.assert_array_equal(data.read_outputs(np.asarray(tok), np.asarray(lens),
                                                  "position")[1, :2], y[1, :2])
  assert int(forced.sum()) == int(target.sum()) == 6


def test_position_layout_validation():
  with pytest.raises(ConfigError) as e:  # learned positions cover 32 tokens
    config.validate(_authors(**{"data.length_max": 33}))
  assert e.value.field == "data.length_max"
  with pytest.raises(ConfigError) as e:
    config.validate(_authors(**{"compose.qualitative": ("am",)}))
  assert e.value.field == "compose.qualitative"
  with pytest.raises(ConfigError) as e:  # the interleaved layout needs 2 * 32 + 3 positions
    config.validate(_authors(**{"data.layout": "aligned"}))
  assert e.value.field == "data.length_max"
  config.validate(_authors(**{"data.layout": "aligned", "model.max_len": 67}))


def _tiny_models(num=3, seed=0):
  cfg = _authors(**{"model.width": 16, "model.num_heads": 2})
  model = zoo.letter_lm(cfg.model, "position")
  params = [model.init(jax.random.key(seed + i)) for i in range(num)]
  # scale the embeddings up so the random models are confident and disagree (sharp ratios)
  params = [p | {"embed": {"embedding": 8 * p["embed"]["embedding"]}} for p in params]
  return cfg, model, params


def test_per_position_composition_equals_float64_product_of_ratios():
  cfg, model, params = _tiny_models()
  x = jax.random.randint(jax.random.key(5), (4, 10), 0, 27)
  lens = jnp.array([10, 7, 3, 1])
  tok, forced, _ = data.build(x, lens, x, "position")
  logp, valid = evaluate.position_logps((model,) * 3, tuple(params), tok)
  # independent recomputation: p_b * prod_i p_i / p_b, normalised per position, in float64
  probs = []
  for p in params:
    logits = np.asarray(forward(model, p, jnp.where(valid, x, 0)), np.float64)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    probs.append(e / e.sum(-1, keepdims=True))
  pb, p1, p2 = probs
  want = pb * (p1 / pb) * (p2 / pb)
  want /= want.sum(-1, keepdims=True)
  ok = np.asarray(valid)
  np.testing.assert_allclose(np.exp(np.asarray(logp))[ok], want[ok], atol=2e-6)
  assert np.abs(want - pb).max() > 0.1  # the experts do change the background's distribution
  # decode_all writes the argmax in the output half, PAD beyond each length, x untouched
  out = evaluate.decode_all(cfg, (model,) * 3, tuple(jax.tree.map(lambda a: a[None], p)
                                                     for p in params), tok[None], forced[None])
  y = np.where(ok, want.argmax(-1), data.PAD)
  np.testing.assert_array_equal(out[0, :, 10:], y)
  np.testing.assert_array_equal(out[0, :, :10], np.asarray(tok[:, :10]))


def test_one_pass_equals_stepping_through_the_caches():
  """With nothing fed back, composing the models' caches in lockstep (x_t fed at step t) gives
  the one-pass composition: the position layout's two readings agree."""
  _, model, params = _tiny_models(seed=3)
  x = jax.random.randint(jax.random.key(1), (3, 9), 0, 27)
  tok, _, _ = data.build(x, jnp.full((3,), 9), x, "position")
  one_pass, _ = evaluate.position_logps((model,) * 3, tuple(params), tok)
  caches = [model.init_cache(3, 9) for _ in params]
  steps = []
  for t in range(9):
    outs = [model.apply(p, x[:, t:t + 1], c, jnp.ones((3, 1), bool))
            for p, c in zip(params, caches, strict=True)]
    caches = [c for _, c in outs]
    lp = [jax.nn.log_softmax(lo[:, 0], -1) for lo, _ in outs]
    steps.append(lp[0] + (lp[1] - lp[0]) + (lp[2] - lp[0]))
  stepped = jax.nn.log_softmax(jnp.stack(steps, 1), -1)
  np.testing.assert_allclose(np.asarray(stepped), np.asarray(one_pass), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(np.argmax(stepped, -1), np.argmax(one_pass, -1))


def _logp(*probs):
  p = np.asarray(probs, np.float64)
  return jnp.asarray(np.log(np.append(p, 1 - p.sum())), jnp.float32)


def test_tail_risk_sees_a_tail_token_outvoting_both_experts():
  """GAMMA's failure, tokens (A, K, R, rest): the background (identity) and the inactive
  expert (M>B) rank A first, the active one (A>K) K; the background gives R log p -10.1, the
  experts -5.9 and -6.6, and K less under the inactive expert than under the background. The
  composition picks R, which no component ranks first, while the inactive expert's KL to the
  background stays below the 0.1 threshold."""
  e = np.exp
  pb = _logp(1 - e(-6) - e(-10.1) - 0.01, e(-6), e(-10.1))
  p1 = _logp(0.05, 0.9, e(-5.9))
  p2 = _logp(1 - e(-9) - e(-6.6) - 0.01, e(-9), e(-6.6))
  logp_c = jax.nn.log_softmax(p1 + p2 - pb)
  assert int(jnp.argmax(logp_c)) == 2
  r = diagnostics.tail_risk(pb[None, None], jnp.stack([p1, p2])[:, None, None], logp_c[None, None])
  np.testing.assert_allclose(float(r["tail_boost_BxT"][0, 0]), (10.1 - 5.9) + (10.1 - 6.6),
                             atol=1e-4)  # R is the only token with p_b < 1e-3
  assert bool(r["unranked_pick_BxT"][0, 0]) and float(r["unranked_mass_BxT"][0, 0]) > 0.5
  assert float(diagnostics.kl(p2, pb)) < 0.1  # the KL active set calls this step one-expert
  # a factorized step (the inactive expert equals the background): the composition is p1, its
  # argmax is p1's, and the unranked mass is p1's mass off the two top tokens
  r = diagnostics.tail_risk(pb[None, None], jnp.stack([p1, pb])[:, None, None], p1[None, None])
  assert not bool(r["unranked_pick_BxT"][0, 0])
  np.testing.assert_allclose(float(r["unranked_mass_BxT"][0, 0]),
                             1 - float(jnp.exp(p1[0]) + jnp.exp(p1[1])), rtol=1e-5)


def test_substitution_rows_in_the_position_layout():
  """The substitution experiment end to end on untrained position models (identity copies of
  one init, so the composition is the background and log Z_t = 0)."""
  cfg = load_config("letters", "tiny", **{"num_seeds": 1, "experiments": ("substitution",),
                                          "data.layout": "position"})
  model = zoo.letter_lm(cfg.model, "position")
  p = jax.tree.map(lambda a: a[None], model.init(jax.random.key(0)))
  tasks = registry.scratch_tasks(cfg)
  ctx = Ctx(cfg, zoo.Zoo(model, {t: p for t in tasks}, {}, jax.random.key(0)[None]))
  (row,) = registry.EXPERIMENTS["substitution"].run(ctx)
  assert abs(float(row["mean_abs_log_z"])) < 1e-5 and float(row["overlap"]) == 0
  assert float(row["unranked_pick_frac"]) == 0  # the composition is the background here
  background = evaluate.exact_match(cfg, (model,), (p,), ctx.x, ctx.len, data.table([]))[0]
  composed = evaluate.exact_match(cfg, (model,) * 3, (p, p, p), ctx.x, ctx.len,
                                  data.table([]))[0]
  np.testing.assert_array_equal(background, composed)
  assert set(row["qualitative"]) == set(cfg.compose.qualitative)
  assert all(len(v) == len(k) and set(v) <= set(data.SYMBOLS)
             for k, v in row["qualitative"].items())


@pytest.mark.heavy  # a tiny run through the binary, ~20 s: collected first (tests/conftest.py)
def test_k_experts_and_their_baselines_run_at_the_authors_own_setting(tmp_path):
  """The command of `make reproduce-cpu-letters-k` at test size: the authors preset (one pass
  per position, independent inits, GPT-2's init) with k experts and every baseline; the letters'
  k row reads this run and says the layout has no EOS."""
  experiments = ("substitution", "baselines", "k_experts", "k_baselines")
  cfg = _authors(experiments=experiments)
  config.validate(cfg)
  subs = list(cfg.compose.k_experts)
  assert len(subs) == cfg.compose.k_max == 8 and cfg.model.init == "gpt2"
  joints = [data.joint_name(subs[:k]) for k in range(2, 9)]
  assert set(subs + joints) <= set(registry.scratch_tasks(cfg))
  workdir = tmp_path / "runs" / "authors_k"
  done = subprocess.run([sys.executable, os.path.join(REPO, "experiments", "train.py"),
                         "--config=configs/letters.py:authors", f"--workdir={workdir}",
                         f"--config.experiments={experiments!r}", *TINY], cwd=REPO,
                        capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  run = report_rows.load_runs(str(tmp_path))["authors_k"]
  k = {(r["k"], r["seed"]): r for r in run["k_experts"]}
  assert sorted(k) == [(i, s) for i in (1, 2, 3) for s in (0, 1)]
  # no EOS in the 27 symbols: its probability is undefined (jsonl keeps nan as a string)
  assert all(np.isnan(report_rows.number(r["p_eos_at_eos"])) for r in k.values())
  base = {(r["k"], r["method"], r["seed"]): r["exact_match"] for r in run["k_baselines"]}
  assert {m for _, m, _ in base} == {"joint", "weight_average", "task_arithmetic_0.5",
                                     "task_arithmetic_1"}
  assert {i for i, _, _ in base} == {1, 2, 3}
  assert all(0 <= report_rows.number(v) <= 1 for v in base.values())
  assert report_rows.k_baseline_rows({"authors_k": run})[0][2] == "composition"  # k = 1 first
  found = letter_claims.k_claim(report_rows.load_runs(str(tmp_path)))
  assert found["ours"].startswith("authors_k (authors, one pass, per position") and \
      "GPT-2 init" in found["ours"]
  assert "no EOS in this layout" in found["composition"]


# the authors' preset at test size: its layout, init, positions and head, fewer of everything
TINY = ("--config.num_seeds=2", "--config.model.width=16", "--config.model.num_heads=1",
        "--config.model.num_layers=1", "--config.train.num_steps=150",
        "--config.train.batch_size=8", "--config.train.chunk_size=75",
        "--config.train.progress=False", "--config.optim.learning_rate=1e-2",
        "--config.data.num_train=0", "--config.data.test_size=64",
        "--config.compose.k_experts=('A>B','C>D','E>F')", "--config.compose.k_max=3",
        "--config.compose.pairs=(('A>B','C>D'),)", "--config.compose.eval_batch=64",
        "--config.compose.qualitative=('AMMA',)")
