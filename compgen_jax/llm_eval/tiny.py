"""Tiny random Gemma-2 checkpoints for the CPU preset and the tests, written as real Hugging Face
directories (so the whole pipeline, loader included, runs on them).

A SentencePiece BPE tokenizer with byte fallback (lm/tokenizer.py) is trained on the benchmark
prompts; the background model is random and each other model is the background plus
Gaussian noise, like experts fine-tuned from one base (so task arithmetic has task vectors).
Written once per directory and reused; the same seed writes the same files.
"""

import os

import jax
import jax.numpy as jnp
import ml_collections
import sentencepiece as spm

from compgen_jax import rng
from compgen_jax.lm import gemma2, hf_export, tokenizer


def config(settings: ml_collections.ConfigDict, vocab_size: int) -> gemma2.Gemma2Config:
  s = settings
  return gemma2.Gemma2Config(
      vocab_size=vocab_size, width=s.width, num_layers=s.num_layers, num_heads=s.num_heads,
      num_kv_heads=s.num_kv_heads, head_dim=s.head_dim, mlp_dim=s.mlp_dim, rms_eps=1e-6,
      rope_base=10_000.0, query_pre_attn_scalar=float(s.head_dim), attn_softcap=50.0,
      final_softcap=30.0, sliding_window=s.sliding_window,
      sliding_layers=tuple(i % 2 == 0 for i in range(s.num_layers)), bos_id=2, eos_id=1,
      pad_id=0)


def ensure_models(directory: str, settings: ml_collections.ConfigDict, names: list[str],
                  texts: list[str], seed: int) -> dict[str, str]:
  """{name: checkpoint dir} under `directory`, writing the ones not there yet (the first name
  is written as the background the others perturb)."""
  if not names:
    return {}
  os.makedirs(directory, exist_ok=True)
  tok = os.path.join(directory, "tokenizer.model")
  if not os.path.isfile(tok):
    tokenizer.train(tok, texts, settings.vocab_size)
  vocab = spm.SentencePieceProcessor(model_file=tok).get_piece_size()
  c = config(settings, vocab)
  key = rng.stream(rng.run_key(seed, 0), "tiny_models")
  base = gemma2.init_params(c, key)
  paths = {}
  for i, name in enumerate(names):
    paths[name] = os.path.join(directory, name)
    if os.path.isfile(os.path.join(paths[name], "model.safetensors")):
      continue
    params = base
    if i:
      noise_key = jax.random.fold_in(key, i)
      leaves, treedef = jax.tree.flatten(base)
      keys = jax.random.split(noise_key, len(leaves))
      params = treedef.unflatten([
          a + settings.expert_noise * jax.random.normal(k, a.shape, a.dtype)
          for a, k in zip(leaves, keys, strict=True)])
    hf_export.write(paths[name], c, jax.tree.map(jnp.asarray, params), tok)
  return paths
