"""The authors' composed greedy decoding loop in Hugging Face PyTorch, for
`compose_llm_speed.py --hf` (torch and transformers are not project dependencies: `make venv-hf`).

The semantics of `merged_gen` in the authors' supplement notebook (Selective_Composition_Code.ipynb,
github.com/Aakash-verse/Compositional-Generalization-in-Autoregressive-Models-via-Logit-Composition):
each model prefills the prompt and keeps its own past_key_values; every step composes the last
logits as sum_i log p_i - clamp(log p_b, -1e4) (experts summed against one background term),
takes the argmax and feeds it to every model, the attention mask growing by one. `authors_loop`
is that loop (batch 1, one prompt at a time); `batched_loop` runs it on a left-padded batch (an
attention mask, and positions counting the valid tokens as HF's `generate` does). Unlike the
notebook, EOS does not stop a sequence: every system of the benchmark generates the same count.
"""

import inspect

import numpy as np
import torch
from transformers import Gemma2ForCausalLM

DEFAULT_THREADS = torch.get_num_threads()
# transformers 5 renamed past_key_values to cache (argument and output field)
_CACHE = ("cache" if "cache" in inspect.signature(Gemma2ForCausalLM.forward).parameters
          else "past_key_values")


def load(directories: list[str]) -> list:
  """Gemma2ForCausalLM per checkpoint directory, float32, eager attention (the one HF attention
  that applies Gemma-2's attention-logit soft-cap), in eval mode."""
  return [Gemma2ForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
          .eval() for d in directories]


def set_threads(threads: int) -> None:
  """torch's intra-op threads for the loops (0: torch's default, one per core)."""
  torch.set_num_threads(threads or DEFAULT_THREADS)


def _compose(logits_MxBxV: list) -> torch.Tensor:
  """The authors' operator on the models' last logits, background first: [B, V]."""
  logp = [torch.log_softmax(x.float(), dim=-1) for x in logits_MxBxV]
  return sum(logp[1:]) - logp[0].clamp(min=-1e4)


@torch.inference_mode()
def batched_loop(models: list, prompts_BxP: np.ndarray, valid_BxP: np.ndarray,
                 new_tokens: int) -> np.ndarray:
  """Composed greedy decoding of a left-padded batch [B, P]: the new tokens [B, N]."""
  ids = torch.tensor(np.asarray(prompts_BxP), dtype=torch.long)
  mask = torch.tensor(np.asarray(valid_BxP), dtype=torch.long)
  pos = (mask.cumsum(dim=1) - 1).clamp(min=0)
  states = []
  for m in models:
    out = m(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
    states.append([getattr(out, _CACHE), out.logits[:, -1]])
  pos, tokens = pos[:, -1:], []
  for _ in range(new_tokens):
    next_Bx1 = torch.argmax(_compose([s[1] for s in states]), dim=-1, keepdim=True)
    tokens.append(next_Bx1)
    mask, pos = torch.cat([mask, torch.ones_like(next_Bx1)], dim=1), pos + 1
    for m, s in zip(models, states, strict=True):
      out = m(input_ids=next_Bx1, attention_mask=mask, position_ids=pos, use_cache=True,
              **{_CACHE: s[0]})
      s[:] = [getattr(out, _CACHE), out.logits[:, -1]]
  return torch.cat(tokens, dim=1).numpy()


def authors_loop(models: list, prompts_BxP: np.ndarray, valid_BxP: np.ndarray,
                 new_tokens: int) -> np.ndarray:
  """The authors' batch-1 loop over the rows one at a time, each prompt without its padding
  (its positions 0.., HF's default there): the new tokens [B, N]."""
  rows = [batched_loop(models, p[v][None], np.ones((1, v.sum()), bool), new_tokens)
          for p, v in zip(np.asarray(prompts_BxP), np.asarray(valid_BxP, bool), strict=True)]
  return np.concatenate(rows)
