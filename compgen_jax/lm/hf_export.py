"""Writing Gemma-2 params as a Hugging Face checkpoint directory (config.json + safetensors).

The inverse of `gemma2.params_from_hf`: what we train, merge or make at random can be read back
by our loader (and by Hugging Face's). Used for the CPU preset's tiny models and for exporting
merged params (task arithmetic, weight averaging) as checkpoints of their own.
"""

import json
import os
import shutil

import numpy as np
from safetensors.numpy import save_file

from compgen_jax.lm import gemma2
from compgen_jax.types import PyTree

# ours -> HF Linear [out, in] (the inverse of gemma2._layer_tensors' conversions)
_TO_HF = {
    "q": lambda w: w.reshape(w.shape[0], -1).T,
    "k": lambda w: w.reshape(w.shape[0], -1).T,
    "v": lambda w: w.reshape(w.shape[0], -1).T,
    "o": lambda w: w.reshape(-1, w.shape[-1]).T,
    "gate": lambda w: w.T, "up": lambda w: w.T, "down": lambda w: w.T,
}


def hf_config(c: gemma2.Gemma2Config) -> dict:
  """A Hugging Face Gemma-2 config.json dict that `gemma2.config_from_hf` maps back to `c`."""
  # an int, as in Gemma-2's own config.json: transformers >= 5 rejects 256.0 (only a
  # non-integral scalar, which HF cannot load, stays a float)
  scalar = c.query_pre_attn_scalar
  return {
      "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
      "vocab_size": c.vocab_size, "hidden_size": c.width, "num_hidden_layers": c.num_layers,
      "num_attention_heads": c.num_heads, "num_key_value_heads": c.num_kv_heads,
      "head_dim": c.head_dim, "intermediate_size": c.mlp_dim, "rms_norm_eps": c.rms_eps,
      "rope_theta": c.rope_base,
      "query_pre_attn_scalar": int(scalar) if float(scalar).is_integer() else scalar,
      "attn_logit_softcapping": c.attn_softcap, "final_logit_softcapping": c.final_softcap,
      "sliding_window": None if c.sliding_window >= gemma2.GLOBAL_WINDOW else c.sliding_window,
      "layer_types": ["sliding_attention" if s else "full_attention" for s in c.sliding_layers],
      "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False,
      "tie_word_embeddings": True, "bos_token_id": c.bos_id, "eos_token_id": c.eos_id,
      "pad_token_id": c.pad_id, "torch_dtype": "float32",
  }


def hf_tensors(c: gemma2.Gemma2Config, params: PyTree) -> dict[str, np.ndarray]:
  """Our params pytree as HF tensor names -> float32 arrays."""
  hf_names = {ours: hf for ours, (hf, _, _) in gemma2._layer_tensors(c).items()}
  out = {"model.embed_tokens.weight": params["embed"], "model.norm.weight": params["final_norm"]}
  for ours, stacked in params["layers"].items():
    to_hf = _TO_HF.get(ours, lambda w: w)
    for i in range(c.num_layers):
      out[f"model.layers.{i}.{hf_names[ours]}.weight"] = to_hf(np.asarray(stacked[i]))
  return {k: np.ascontiguousarray(np.asarray(v, np.float32)) for k, v in out.items()}


def write(directory: str, c: gemma2.Gemma2Config, params: PyTree,
          tokenizer_model: str | None = None) -> None:
  """Writes config.json, model.safetensors and (copied from `tokenizer_model`) tokenizer.model.

  The files are written into a temporary sibling and renamed into place, so a half-written
  checkpoint never sits under `directory`.
  """
  tmp = directory.rstrip("/") + ".tmp"
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  with open(os.path.join(tmp, "config.json"), "w") as f:
    json.dump(hf_config(c), f, indent=2)
  save_file(hf_tensors(c, params), os.path.join(tmp, "model.safetensors"),
            metadata={"format": "pt"})
  if tokenizer_model is not None:
    shutil.copyfile(tokenizer_model, os.path.join(tmp, "tokenizer.model"))
  shutil.rmtree(directory, ignore_errors=True)
  os.replace(tmp, directory)
