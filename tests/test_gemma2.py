"""Gemma-2: parity with the Hugging Face PyTorch implementation (tests/fixtures/gemma2_tiny, made
by tests/fixtures/make_gemma2_fixture.py), KV cache and padding invariants, loader errors."""

import json
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from compgen_jax.lm import gemma2, loading
from compgen_jax.lm.model import forward, prefill
from compgen_jax.types import CheckpointError

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "gemma2_tiny")


@pytest.fixture(scope="module")
def hf():
  f = np.load(os.path.join(FIXTURE, "logits.npz"))
  return {k: f[k] for k in f.files}


@pytest.fixture(scope="module")
def loaded():
  return gemma2.load(FIXTURE)


def test_fixture_is_past_the_sliding_window(loaded, hf):
  model, _ = loaded
  cfg, _ = loading.read_config(FIXTURE)
  assert hf["valid"].sum(axis=1).min() > cfg["sliding_window"]
  assert set(cfg["layer_types"]) == {"sliding_attention", "full_attention"}
  assert model.vocab_size == hf["logits"].shape[-1]


def test_logits_match_hugging_face(loaded, hf):
  model, params = loaded
  logits = forward(model, params, jnp.asarray(hf["tokens"]), jnp.asarray(hf["valid"]))
  valid = hf["valid"]
  np.testing.assert_allclose(np.asarray(logits)[valid], hf["logits"][valid], atol=1e-5, rtol=0)


def test_left_padding_does_not_change_a_sequence(loaded, hf):
  # fixture row 2 is row 1's first 8 tokens behind 4 pads
  model, params = loaded
  logits = np.asarray(forward(model, params, jnp.asarray(hf["tokens"]), jnp.asarray(hf["valid"])))
  np.testing.assert_allclose(logits[2, 4:], logits[1, :8], atol=1e-5, rtol=0)


def _decode(model, params, tokens_BxT, valid_BxT, max_len, chunk=1):
  cache = model.init_cache(tokens_BxT.shape[0], max_len)
  return prefill(model, params, tokens_BxT, valid_BxT, cache, chunk, all_logits=True)


def test_cache_decode_equals_full_forward_past_the_window(loaded, hf):
  model, params = loaded
  tokens, valid = jnp.asarray(hf["tokens"]), jnp.asarray(hf["valid"])
  full = forward(model, params, tokens, valid)
  stepped, cache = _decode(model, params, tokens, valid, max_len=16)
  assert int(cache["index"]) == tokens.shape[1]
  np.testing.assert_allclose(np.asarray(stepped)[hf["valid"]], np.asarray(full)[hf["valid"]],
                             atol=1e-5, rtol=0)


def test_chunked_prefill_equals_one_shot(loaded, hf):
  model, params = loaded
  tokens, valid = jnp.asarray(hf["tokens"]), jnp.asarray(hf["valid"])
  one_shot, cache_one = _decode(model, params, tokens, valid, max_len=14, chunk=12)
  chunked, cache_chunked = _decode(model, params, tokens, valid, max_len=14, chunk=4)
  np.testing.assert_allclose(np.asarray(chunked)[hf["valid"]], np.asarray(one_shot)[hf["valid"]],
                             atol=1e-5, rtol=0)
  # the caches agree too: the next decoded token sees the same keys either way
  nxt = jnp.full((3, 1), 5, jnp.int32)
  on = jnp.ones((3, 1), bool)
  a, _ = model.apply(params, nxt, cache_one, on)
  b, _ = model.apply(params, nxt, cache_chunked, on)
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, rtol=0)


def test_bfloat16_is_close_to_float32(loaded, hf):
  model, params = loaded
  model16, params16 = gemma2.load(FIXTURE, dtype=jnp.bfloat16)
  assert params16["embed"].dtype == jnp.bfloat16
  tokens, valid = jnp.asarray(hf["tokens"]), jnp.asarray(hf["valid"])
  logits16 = forward(model16, params16, tokens, valid)
  assert logits16.dtype == jnp.float32
  err = np.abs(np.asarray(logits16) - hf["logits"])[hf["valid"]]
  assert err.max() < 0.1 and err.mean() < 0.02, (err.max(), err.mean())
  stepped, cache = _decode(model16, params16, tokens, valid, max_len=12, chunk=4)
  assert cache["k"].dtype == jnp.bfloat16
  assert np.abs(np.asarray(stepped) - np.asarray(logits16))[hf["valid"]].max() < 0.05


def test_orbax_cache_round_trip(tmp_path, loaded):
  _, params = loaded
  src = tmp_path / "hf"
  shutil.copytree(FIXTURE, src)
  gemma2.load(str(src), cache_dir=str(tmp_path / "converted"))
  os.remove(src / "model.safetensors")  # the second load reads only the orbax copy
  _, restored = gemma2.load(str(src), cache_dir=str(tmp_path / "converted"))
  jax.tree.map(np.testing.assert_array_equal, restored, params)
  # a cache written for another config is refused, not silently used
  cfg = json.loads((src / "config.json").read_text())
  (src / "config.json").write_text(json.dumps({**cfg, "vocab_size": 256}))
  with pytest.raises(CheckpointError, match="converted"):
    gemma2.load(str(src), cache_dir=str(tmp_path / "converted"))


def _copy(tmp_path, **config_changes):
  src = tmp_path / "hf"
  shutil.copytree(FIXTURE, src)
  cfg = json.loads((src / "config.json").read_text())
  cfg.update(config_changes)
  (src / "config.json").write_text(json.dumps(cfg))
  return str(src)


def test_missing_files_are_named(tmp_path):
  with pytest.raises(CheckpointError, match="config.json"):
    gemma2.load(str(tmp_path))
  src = _copy(tmp_path)
  os.remove(os.path.join(src, "model.safetensors"))
  with pytest.raises(CheckpointError, match=r"no \*\.safetensors file in .*hf"):
    gemma2.load(src)


def test_wrong_shapes_name_the_file(tmp_path):
  src = _copy(tmp_path, vocab_size=256)
  with pytest.raises(CheckpointError, match=r"model\.safetensors.*embed_tokens.*\(128, 32\)"):
    gemma2.load(src)


def test_vocabulary_mismatch_and_unsupported_config_are_named(tmp_path):
  with pytest.raises(CheckpointError, match=r"config\.json.*vocab_size 128, expected 256000"):
    gemma2.load(FIXTURE, vocab_size=256000)
  src = _copy(tmp_path, model_type="gemma3")
  with pytest.raises(CheckpointError, match=r"config\.json.*gemma3"):
    gemma2.load(src)


def test_random_init_decodes_like_full_forward():
  # no checkpoint: init, a global-only config (sliding_window null), decode == forward
  hf_cfg, _ = loading.read_config(FIXTURE)
  c = gemma2.config_from_hf({**hf_cfg, "sliding_window": None, "final_logit_softcapping": None})
  model = gemma2.make_model(c)
  params = model.init(jax.random.key(0))
  tokens = jax.random.randint(jax.random.key(1), (2, 8), 0, c.vocab_size)
  valid = jnp.ones(tokens.shape, bool)
  stepped, _ = _decode(model, params, tokens, valid, max_len=8, chunk=2)
  np.testing.assert_allclose(np.asarray(stepped), np.asarray(forward(model, params, tokens, valid)),
                             atol=1e-5, rtol=0)


def test_sharded_bfloat16_checkpoint_loads(tmp_path, loaded):
  # real checkpoints are sharded with an index, often in bfloat16 (which numpy cannot read)
  from safetensors.flax import load_file, save_file
  _, params = loaded
  src = _copy(tmp_path)
  tensors = load_file(os.path.join(src, "model.safetensors"))
  os.remove(os.path.join(src, "model.safetensors"))
  names = sorted(tensors)
  weight_map = {}
  for shard, part in (("a.safetensors", names[::2]), ("b.safetensors", names[1::2])):
    save_file({n: tensors[n].astype(jnp.bfloat16) for n in part}, os.path.join(src, shard))
    weight_map.update(dict.fromkeys(part, shard))
  with open(os.path.join(src, "model.safetensors.index.json"), "w") as f:
    json.dump({"weight_map": weight_map}, f)
  _, got = gemma2.load(src)
  want = jax.tree.map(lambda a: a.astype(jnp.bfloat16).astype(jnp.float32), params)
  jax.tree.map(np.testing.assert_array_equal, got, want)
  os.remove(os.path.join(src, "b.safetensors"))
  with pytest.raises(CheckpointError, match=r"b\.safetensors"):
    gemma2.load(src)


def test_tokenizer_matches_the_model(tmp_path, loaded):
  model, _ = loaded
  sp = gemma2.load_tokenizer(FIXTURE, model)
  ids = sp.encode("the fox adds 2 + 3")
  assert all(0 <= i < model.vocab_size for i in ids)
  assert sp.decode(ids) == "the fox adds 2 + 3"
  with pytest.raises(CheckpointError, match=r"tokenizer\.model.*128 pieces.*vocabulary has 64"):
    gemma2.load_tokenizer(FIXTURE, model._replace(vocab_size=64))
  with pytest.raises(CheckpointError, match=r"tokenizer\.model.*bos"):
    gemma2.load_tokenizer(FIXTURE, model._replace(bos_id=5))
  with pytest.raises(CheckpointError, match=r"tokenizer\.model' not found"):
    gemma2.load_tokenizer(str(tmp_path), model)
