"""compgen_jax/lm_train, its parts: the training initialisation against Hugging Face Gemma-2's
formula, packing (rows, EOS and BOS placement, the loss mask), the masked loss against a
float64 re-computation, weight decay and clipping, and the config's checks. Training through
the engine is in test_lm_train_loop.py."""

import math

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from compgen_jax.lm import gemma2
from compgen_jax.lm.model import forward
from compgen_jax.lm_train import data, experiment, family
from compgen_jax.lm_train import model as model_lib
from compgen_jax.types import ConfigError, DataError
from tests.helpers import load_config

BOS, EOS, PAD = model_lib.BOS_ID, model_lib.EOS_ID, model_lib.PAD_ID


def test_training_init_follows_hugging_face_gemma2():
  m = load_config("lm_train", "test").model.to_dict() | {"vocab_size": 512, "width": 64}
  c = model_lib.gemma_config(ml_collections.ConfigDict(m))
  std = 0.02
  params = model_lib.init_params(c, jax.random.key(0), std)
  assert jax.tree.map(jnp.shape, params) == jax.tree.map(lambda s: s.shape, gemma2.param_shapes(c))
  np.testing.assert_array_equal(params["final_norm"], 0.0)  # scale 1 + w: the identity
  matrices = {"embed": np.delete(np.asarray(params["embed"]), PAD, axis=0)}
  for name, leaf in params["layers"].items():
    if name.endswith("norm"):
      np.testing.assert_array_equal(leaf, 0.0)
    else:
      matrices[name] = np.asarray(leaf)
  np.testing.assert_array_equal(params["embed"][PAD], 0.0)  # nn.Embedding's padding_idx row
  assert set(matrices) == {"embed", "q", "k", "v", "o", "gate", "up", "down"}
  for name, x in matrices.items():
    x = x.astype(np.float64).ravel()
    n = x.size
    # normal(0, std): the sample mean within 5 standard errors std / sqrt(n), the sample
    # standard deviation within 5 of its standard errors std / sqrt(2 n)
    assert abs(x.mean()) < 5 * std / math.sqrt(n), name
    assert abs(x.std() - std) < 5 * std / math.sqrt(2 * n), name
    # Gaussian tails: about 4.55 % beyond 2 std (binomial standard error sqrt(p (1 - p) / n))
    p = math.erfc(2 / math.sqrt(2))
    assert abs(np.mean(np.abs(x) > 2 * std) - p) < 5 * math.sqrt(p * (1 - p) / n), name
  # every matrix draws its own numbers
  firsts = [float(v.ravel()[0]) for v in matrices.values()]
  assert len(set(firsts)) == len(firsts)


def test_packing_places_bos_and_eos_and_targets_each_token_once():
  docs = [[10, 11, 12], [20, 21], [30, 31, 32, 33, 34]]
  packed = data.pack(docs, seq_len=5)
  stream = [BOS, 10, 11, 12, EOS, BOS, 20, 21, EOS, BOS, 30, 31, 32, 33, 34, EOS]
  weight = [0, 1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1]
  rows = -(-(len(stream) - 1) // 4)  # rows overlap by one token: stride seq_len - 1
  assert packed.tokens_NxL.shape == (rows, 5) and packed.tokens_NxL.dtype == np.int32
  for r in range(rows):  # row r starts where row r - 1 ended
    want = (stream + [PAD] * 5)[4 * r: 4 * r + 5]
    np.testing.assert_array_equal(packed.tokens_NxL[r], want)
    np.testing.assert_array_equal(packed.weight_NxL[r, 1:],
                                  (weight + [0] * 5)[4 * r + 1: 4 * r + 5])
  # as targets (positions 1..), the rows hold the stream after its first token exactly once
  targets = packed.tokens_NxL[:, 1:].ravel()[:len(stream) - 1]
  np.testing.assert_array_equal(targets, stream[1:])
  assert packed.weight_NxL[:, 0].sum() == 0 and packed.weight_NxL.sum() == sum(weight)
  np.testing.assert_array_equal(packed.tokens_NxL[:, 1:].ravel()[len(stream) - 1:], PAD)
  no_bos = data.pack(docs, seq_len=5, add_bos=False)
  assert BOS not in no_bos.tokens_NxL and (no_bos.tokens_NxL == EOS).sum() == len(docs)


def test_loss_mask_trains_the_answer_and_its_eos_only():
  prompt_answer = [([10, 11, 12], [40, 41]), ([13], [42, 43, 44])]
  docs = [p + a for p, a in prompt_answer]
  masks = [[0] * len(p) + [1] * len(a) for p, a in prompt_answer]
  packed = data.pack(docs, seq_len=64, loss_masks=masks)
  counted = packed.tokens_NxL[packed.weight_NxL > 0]
  np.testing.assert_array_equal(counted, [40, 41, EOS, 42, 43, 44, EOS])
  with pytest.raises(DataError, match="document 1"):
    data.pack(docs, 8, [masks[0], [1]])


def test_masked_loss_is_the_weighted_mean_cross_entropy():
  cfg = load_config("lm_train", "test")
  c = model_lib.gemma_config(cfg.model)
  params = model_lib.init_params(c, jax.random.key(1), 0.5)  # far from uniform
  packed = data.pack([[5, 6, 7, 8, 9, 10], [11, 12, 13]], 8, [[0, 0, 1, 1, 1, 0], [1, 0, 1]])
  loss, (acc, count) = family.loss_of(c, params, packed.tokens_NxL, packed.weight_NxL)
  logits = np.asarray(forward(gemma2.make_model(c), params, packed.tokens_NxL[:, :-1]),
                      np.float64)
  logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)
                         ) - logits.max(-1, keepdims=True)
  y, w = packed.tokens_NxL[:, 1:], packed.weight_NxL[:, 1:]
  nll = -np.take_along_axis(logp, y[..., None], -1)[..., 0]
  np.testing.assert_allclose(loss, (nll * w).sum() / w.sum(), rtol=1e-5)
  np.testing.assert_allclose(acc, ((logits.argmax(-1) == y) * w).sum() / w.sum(), rtol=1e-6)
  assert count == w.sum()


def test_weight_decay_skips_the_norms_and_clipping_bounds_the_norm():
  cfg = load_config("lm_train", "test")
  c = model_lib.gemma_config(cfg.model)
  ones = jax.tree.map(jnp.ones_like, model_lib.init_params(c, jax.random.key(0), 0.02))
  opt = family.optimizer(cfg)
  state = opt.init(ones)
  state.hyperparams["learning_rate"] = jnp.asarray(1.0)
  updates, _ = jax.jit(opt.update)(jax.tree.map(jnp.zeros_like, ones), state, ones)
  # a zero-gradient AdamW step is -lr * wd * param where decay applies, 0 elsewhere
  for path, u in jax.tree_util.tree_leaves_with_path(updates):
    decayed = not jax.tree_util.keystr(path).endswith("norm']")
    np.testing.assert_allclose(u, -cfg.optim.weight_decay if decayed else 0.0, atol=1e-7)

  # clipping: global norm min(norm, max_norm), the direction kept; 0 leaves grads alone
  grads = jax.tree.map(lambda a: jnp.full_like(a, 0.1), ones)
  norm = float(np.sqrt(sum(np.sum(np.asarray(a, np.float64) ** 2)
                           for a in jax.tree.leaves(grads))))
  for max_norm in (norm / 4, 2 * norm):
    clipped = family.clip(grads, max_norm)
    scale = min(1.0, max_norm / norm)
    for g, cg in zip(jax.tree.leaves(grads), jax.tree.leaves(clipped), strict=True):
      np.testing.assert_allclose(cg, scale * np.asarray(g), rtol=1e-5)
  assert family.clip(grads, 0) is grads


@pytest.mark.parametrize("field,value", [
    ("num_seeds", 0), ("model.num_kv_heads", 3), ("model.vocab_size", 4),
    ("model.initializer_range", 0.0), ("corpus.source", "web"), ("corpus.seq_len", 1),
    ("corpus.max_len", 2), ("optim.grad_clip", -1.0), ("optim.weight_decay", -0.1),
    ("train.log_every", 7), ("evals.every", 30), ("corpus.num_documents", 0),
    ("init_from", "/no/such/model"), ("corpus.tokenizer", "/no/such/tokenizer.model")])
def test_bad_fields_are_refused_before_anything_is_written(tmp_path, field, value):
  cfg = load_config("lm_train", "test", **{field: value})
  with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
    experiment.train(cfg, str(tmp_path / "w"))
  assert not (tmp_path / "w").exists()


def test_jsonl_corpus_is_checked_line_by_line(tmp_path):
  path = tmp_path / "c.jsonl"
  path.write_text('{"tokens": [5, 6], "loss_mask": [0, 1]}\n{"tokens": [7]}\n')
  with pytest.raises(DataError, match="some lines only"):
    data.read_jsonl(str(path), 64)
  path.write_text('{"tokens": [5, 64]}\n')
  with pytest.raises(DataError, match="line 1"):
    data.read_jsonl(str(path), 64)
  path.write_text('{"tokens": [5, 6], "loss_mask": [0, 1]}\n\n{"tokens": [7], "loss_mask": [1]}\n')
  assert data.read_jsonl(str(path), 64) == ([[5, 6], [7]], [[0, 1], [1]])


def test_presets_validate_and_grow():
  sizes = []
  for preset in ("test", "quick", "cpu"):
    cfg = load_config("lm_train", preset)
    experiment.validate(cfg)
    shapes = gemma2.param_shapes(model_lib.gemma_config(cfg.model))
    sizes.append(sum(math.prod(s.shape) for s in jax.tree.leaves(shapes)))
  assert sizes == sorted(sizes) and sizes[0] < sizes[1] < sizes[2]
