"""Per-composition step specs (configs/llm.py: a composition given as {experts, compose}, whose
`compose` overrides the global fields it names): variants scored side by side in one run equal
the runs with that spec as the global one, tau = 0 gating is the paper's operator, and bad
per-system fields are refused naming the field."""

import copy
import os

import ml_collections
import numpy as np
import pytest

from compgen_jax import metric_writer
from compgen_jax.llm_eval import benchmarks, runner, systems
from compgen_jax.types import ConfigError
from tests import helpers

MASKED = dict(mask="top_p", mask_p=0.5)
SELECTIVE = dict(gate="top1", gate_tau=0.02)
SAME = ("raw", "num_tokens", "finish", "active_K", "both_active_KxK")


def _run(cfg, loaded, workdir: str) -> dict[str, list[dict]]:
  """Every system of cfg on the gsm8k fixture through the runner: {system: rows by id}."""
  problems = benchmarks.BENCHMARKS["gsm8k"].load(cfg.benchmarks.gsm8k)
  out = {}
  for system in systems.resolve(cfg):
    runner.run_one(cfg, loaded, system, "gsm8k", problems, workdir)
    out[system.name] = sorted(metric_writer.read_rows(
        os.path.join(workdir, "gsm8k", f"{system.name}.jsonl")), key=lambda r: r["id"])
  return out


def _config(cfg, **compose):
  cfg = copy.deepcopy(cfg)
  with cfg.unlocked():
    cfg.compose.update(operator="paper", **compose)
    cfg.generate.update(max_new_tokens=10, pad_to=32)
    cfg.benchmarks.gsm8k.num_fewshot = 1  # short prompts: a fast test
    cfg.compositions.composed_masked.compose.update(MASKED)
    cfg.compositions.composed_selective.compose.update(SELECTIVE)
    cfg.compositions["composed_tau0"] = ml_collections.ConfigDict(dict(
        experts=("math", "coding"), compose=dict(gate="kl", gate_tau=0.0)))
  return cfg


def test_variants_side_by_side_equal_their_single_spec_runs(tiny_models, tmp_path):
  """composed, composed_masked, composed_selective and a tau = 0 gate in one run: each
  equals the run that sets its spec globally, and tau = 0 gating equals the paper's
  operator."""
  cfg, _, loaded = tiny_models
  side = _config(cfg)
  with side.unlocked():
    side.systems = ("composed", "composed_masked", "composed_selective", "composed_tau0")
  together = _run(side, loaded, str(tmp_path / "side"))
  for name, compose in (("composed", {}), ("composed_masked", MASKED),
                        ("composed_selective", SELECTIVE), ("composed_tau0", {})):
    single = _config(cfg, **compose)
    with single.unlocked():
      single.systems = ("composed",)
    [alone] = _run(single, loaded, str(tmp_path / name)).values()
    for a, b in zip(together[name], alone, strict=True):
      assert [a[k] for k in SAME] == [b[k] for k in SAME], name
      np.testing.assert_allclose(a["sum_abs_log_z"], b["sum_abs_log_z"], rtol=1e-4)
  texts = {name: [r["raw"] for r in rows] for name, rows in together.items()}
  assert texts["composed_masked"] != texts["composed"] != texts["composed_selective"]
  # the summary names each system's spec
  summary = runner.summarize(str(tmp_path / "side"), side, systems.resolve(side))
  assert [r["spec"] for r in summary] == ["paper", "paper, mask=top_p 0.5",
                                          "paper, gate=top1 0.02", "paper, gate=kl 0"]


def test_overrides_inherit_the_global_spec_and_weights(tiny_models):
  cfg = _config(tiny_models[0], eos="min", lam=(0.5, 2.0))
  with cfg.unlocked():
    cfg.systems = ("composed", "composed_masked")
    cfg.compositions.composed_masked.compose.eos = "vote"
  plain, masked = systems.resolve(cfg)
  assert (plain.compose.mask, plain.compose.eos) == ("none", "min")
  assert (masked.compose.mask, masked.compose.mask_p, masked.compose.eos) == ("top_p", 0.5, "vote")
  assert plain.weights == masked.weights == (0.5, 2.0)


@pytest.mark.parametrize("entry, match", [
    (dict(experts=("math", "coding"), compose=dict(maks="top_p")),
     "'compositions.v.compose.maks'.*not a field of the step spec"),
    (dict(experts=("math", "coding"), compose=dict(mask="nucleus")),
     "'compositions.v.compose.mask'.*unknown 'nucleus'"),
    (dict(experts=("math", "coding"), compose=dict(gate="kl", gate_tau=-0.5)),
     "'compositions.v.compose.gate_tau'"),
    (dict(experts=("math", "coding"), compose=dict(mask_p=1.5)),
     "'compositions.v.compose.mask_p'"),
    (dict(experts=("math", "coding"), compose=dict(eos="first")),
     "'compositions.v.compose.eos'.*unknown 'first'"),
    (dict(experts=("math", "coding"), compose=dict(kl_threshold=-1.0)),
     "'compositions.v.compose.kl_threshold'"),
    (dict(experts=("math", "coding"), compose=dict(operator="paper", lam=(1.0,))),
     "'compositions.v.compose.lam'.*1 weights for 2 experts"),
    (dict(experts=("math", "coding"), compose=dict(lam=(1.0, 2.0))),  # the authors' operator
     "'compositions.v.compose.lam'.*all weights 1"),
    (dict(experts=("math", "nope")), "'compositions.v.experts'.*unknown 'nope'"),
    (dict(compose=dict(mask="top_p")), "'compositions.v.experts'.*missing"),
    (dict(experts=("math",), gate="kl"), "'compositions.v.gate'.*unknown field"),
    (dict(experts=("math",), compose="top_p"), "'compositions.v.compose'.*must be a section"),
])
def test_bad_per_system_fields_are_refused_naming_the_field(entry, match):
  cfg = helpers.llm_config()
  with cfg.unlocked():
    cfg.compositions["v"] = ml_collections.ConfigDict(entry)
    cfg.systems = ("base", "v")
  with pytest.raises(ConfigError, match=match):
    runner.validate(cfg)
