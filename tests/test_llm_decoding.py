"""LLM decoding through the text pipeline (llm_eval/decoding.py on the tiny models): batching and
padding, self-composition, member templates and sampling keys, speculative decoding."""

import copy

import numpy as np
import pytest

from compgen_jax.llm_eval import decoding, systems
from compgen_jax.types import ConfigError


def _complete(cfg, loaded, members, prompts, batch_size):
  cfg = copy.deepcopy(cfg)
  with cfg.unlocked():
    cfg.generate.batch_size = batch_size
  models = tuple(loaded.models[m] for m in members)
  params = tuple(loaded.params[m] for m in members)
  out = {}
  for idx, rows in decoding.completions(models, params, loaded.tokenizer, prompts, ("\n\n",),
                                        cfg.generate, cfg.compose):
    out.update(zip(idx, rows, strict=True))
  return [out[i] for i in range(len(prompts))]


PROMPTS = ["Question: what is 2 + 3?\nAnswer:", "def add(a, b):",
           "Question: a long one, with many more tokens than the others in the batch?\nAnswer:"]


def test_batching_and_padding_do_not_change_completions(tiny_models):
  cfg, _, loaded = tiny_models
  one = _complete(cfg, loaded, ("base",), PROMPTS, 1)
  three = _complete(cfg, loaded, ("base",), PROMPTS, 3)
  two = _complete(cfg, loaded, ("base",), PROMPTS, 2)  # a filler row in the second batch
  for key in ("raw", "num_tokens", "finish"):
    assert [r[key] for r in one] == [r[key] for r in three] == [r[key] for r in two]
  assert all(r["num_tokens"] >= 1 for r in one)


def test_composing_the_background_with_itself_is_the_background(tiny_models):
  """compose(b, [b]) == b, token for token, through the whole text pipeline; and composing two
  different experts changes something (the option does something)."""
  cfg, _, loaded = tiny_models
  cfg = copy.deepcopy(cfg)
  with cfg.unlocked():
    cfg.compose.operator = "paper"
  alone = _complete(cfg, loaded, ("base",), PROMPTS, 3)
  self_composed = _complete(cfg, loaded, ("base", "base"), PROMPTS, 3)
  assert [r["raw"] for r in alone] == [r["raw"] for r in self_composed]
  assert all(r["sum_abs_log_z"] < 1e-3 for r in self_composed)
  assert all(a == 0 for r in self_composed for a in r["active_K"])
  composed = _complete(cfg, loaded, ("base", "math", "coding"), PROMPTS, 3)
  assert [r["raw"] for r in composed] != [r["raw"] for r in alone]
  assert any(r["sum_abs_log_z"] > 0 for r in composed)


def test_member_templates_and_sampling_keys_through_the_text_pipeline(tiny_models):
  """CFG's member under the empty template: at weight 0 the composition is the background
  (text for text), at weight -1 it changes the text; sampled completions depend on the
  problem, not on its batch (a key per problem id)."""
  cfg, _, loaded = tiny_models
  cfg = copy.deepcopy(cfg)
  with cfg.unlocked():
    cfg.systems = ("base", "guided")
    cfg.compose.operator = "paper"
  guided = systems.resolve(cfg)[1]
  assert guided.members == ("base", "base") and guided.templates == ("{prompt}", "")
  assert guided.weights == (cfg.components.unconditional.weight,)  # the component's weight
  with cfg.unlocked():
    cfg.systems = ("composed", "guided")
    cfg.compose.lam = (2.0,)
  with pytest.raises(ConfigError, match="compose.lam"):  # an override for every composition
    systems.resolve(cfg)
  with cfg.unlocked():
    cfg.compose.lam = ()
  assert [s.weights for s in systems.resolve(cfg)] == [(1.0, 1.0), (-0.5,)]
  alone = _complete(cfg, loaded, ("base",), PROMPTS, 3)
  texts = {}
  for lam in (0.0, -1.0):
    with cfg.unlocked():
      cfg.compose.lam = (lam,)
    out = {}
    for idx, rows in decoding.completions(
        (loaded.models["base"],) * 2, (loaded.params["base"],) * 2, loaded.tokenizer, PROMPTS,
        ("\n\n",), cfg.generate, cfg.compose, templates=guided.templates):
      out.update(zip(idx, rows, strict=True))
    texts[lam] = [out[i]["raw"] for i in range(len(PROMPTS))]
  assert texts[0.0] == [r["raw"] for r in alone]
  assert texts[-1.0] != texts[0.0]
  with cfg.unlocked():
    cfg.generate.update(greedy=False, temperature=1.5, top_k=50)
  one, three = (_complete(cfg, loaded, ("base",), PROMPTS, b) for b in (1, 3))
  assert [r["raw"] for r in one] == [r["raw"] for r in three]
  assert [r["raw"] for r in one] != [r["raw"] for r in alone]


def test_speculative_decoding_gives_the_same_rows(tiny_models):
  """generate.draft_len > 0: the same completions, finish reasons and diagnostics."""
  cfg, _, loaded = tiny_models
  members = ("base", "math", "coding")
  plain = _complete(cfg, loaded, members, PROMPTS, 3)
  cfg = copy.deepcopy(cfg)
  with cfg.unlocked():
    cfg.generate.draft_len = 3
  fast = _complete(cfg, loaded, members, PROMPTS, 3)
  for p, f in zip(plain, fast, strict=True):
    assert (p["raw"], p["num_tokens"], p["finish"], p["active_K"]) == (
        f["raw"], f["num_tokens"], f["finish"], f["active_K"])
    np.testing.assert_allclose(f["sum_abs_log_z"], p["sum_abs_log_z"], rtol=1e-4)
    # every round drafts 3 and emits the accepted ones and one more, within the row's tokens
    assert "drafted" not in p and f["drafted"] % 3 == 0
    assert f["accepted"] <= min(f["drafted"], f["num_tokens"] - f["drafted"] // 3 + 1)
  assert sum(r["num_tokens"] for r in plain) > 3
  with cfg.unlocked():  # sampling decodes speculatively too
    cfg.generate.update(greedy=False, temperature=0.7)
  sampled = _complete(cfg, loaded, members, PROMPTS, 3)
  assert all(r["num_tokens"] >= 1 and 0 <= r["accepted"] <= r["drafted"] for r in sampled)
