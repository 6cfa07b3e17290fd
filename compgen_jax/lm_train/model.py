"""The Gemma-2 architecture a config's `model` section describes, its training initialisation
and which of its parameters weight decay applies to."""

import jax
import jax.numpy as jnp
import ml_collections

from compgen_jax import checks
from compgen_jax.lm import gemma2
from compgen_jax.types import ConfigError, PRNGKey, PyTree

# Gemma's special ids, as lm.tokenizer.train assigns them (pad 0, eos 1, bos 2, unk 3)
PAD_ID, EOS_ID, BOS_ID, NUM_SPECIAL = 0, 1, 2, 4


def default_config() -> ml_collections.ConfigDict:
  """The `model` section: Gemma-2's shape knobs at a CPU size, Gemma-2's soft-caps and an
  initializer_range as HF's Gemma2Config (0.02)."""
  return ml_collections.ConfigDict(dict(
      vocab_size=512, width=128, num_layers=4, num_heads=4, num_kv_heads=2, head_dim=32,
      mlp_dim=512, sliding_window=64, rope_base=10_000.0, attn_softcap=50.0,
      final_softcap=30.0, initializer_range=0.02))


def validate(m: ml_collections.ConfigDict) -> None:
  for name in ("width", "num_layers", "num_heads", "num_kv_heads", "head_dim", "mlp_dim",
               "sliding_window"):
    checks.integer(f"model.{name}", m[name], low=1)
  checks.integer("model.vocab_size", m.vocab_size, low=NUM_SPECIAL + 1)
  if m.num_heads % m.num_kv_heads:
    raise ConfigError("model.num_kv_heads", f"must divide model.num_heads ({m.num_heads}), "
                      f"got {m.num_kv_heads}")
  for name in ("rope_base", "attn_softcap", "final_softcap", "initializer_range"):
    checks.positive(f"model.{name}", m[name])


def gemma_config(m: ml_collections.ConfigDict) -> gemma2.Gemma2Config:
  """The Gemma2Config of a `model` section: sliding and global layers alternating (sliding
  first, as Gemma-2), queries scaled by head_dim^-1/2 (Gemma-2-2B's query_pre_attn_scalar)."""
  return gemma2.Gemma2Config(
      vocab_size=m.vocab_size, width=m.width, num_layers=m.num_layers, num_heads=m.num_heads,
      num_kv_heads=m.num_kv_heads, head_dim=m.head_dim, mlp_dim=m.mlp_dim, rms_eps=1e-6,
      rope_base=float(m.rope_base), query_pre_attn_scalar=float(m.head_dim),
      attn_softcap=float(m.attn_softcap), final_softcap=float(m.final_softcap),
      sliding_window=m.sliding_window,
      sliding_layers=tuple(i % 2 == 0 for i in range(m.num_layers)), bos_id=BOS_ID,
      eos_id=EOS_ID, pad_id=PAD_ID)


def is_norm(name: str) -> bool:
  return name.endswith("norm")


def init_params(c: gemma2.Gemma2Config, key: PRNGKey, std: float) -> PyTree:
  """Training initialisation, as Hugging Face's Gemma2PreTrainedModel._init_weights: every
  Linear weight and the embedding normal(0, initializer_range), the embedding's padding row
  (pad_token_id) zero, every RMSNorm weight zero (Gemma scales by 1 + w, so a zero weight is
  the identity). gemma2.init_params is a test init (normal(0, 0.1) everywhere, norms too)."""
  shapes = gemma2.param_shapes(c)
  names = ["embed"] + sorted(shapes["layers"])
  keys = dict(zip(names, jax.random.split(key, len(names)), strict=True))
  normal = lambda name, s: std * jax.random.normal(keys[name], s.shape, s.dtype)  # noqa: E731
  layers = {name: jnp.zeros(s.shape, s.dtype) if is_norm(name) else normal(name, s)
            for name, s in shapes["layers"].items()}
  embed = normal("embed", shapes["embed"]).at[c.pad_id].set(0.0)
  return {"embed": embed, "final_norm": jnp.zeros(shapes["final_norm"].shape), "layers": layers}


def decay_mask(params: PyTree) -> PyTree:
  """Weight decay on the matrices and the embedding, never on the norms (whose layer-stacked
  weights [N, D] are 2-D, so the engine's ndim > 1 rule would decay them)."""
  return {"embed": True, "final_norm": False,
          "layers": {name: not is_norm(name) for name in params["layers"]}}
