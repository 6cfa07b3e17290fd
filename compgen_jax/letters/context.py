"""What every letter experiment reads (config, trained models, the held-out test set) and the
row fields they share: exact match over all strings and over the strings with every source
letter, and the composition diagnostics of one seed."""

import numpy as np

from compgen_jax.composition import compose
from compgen_jax.composition import spec as spec_lib
from compgen_jax.composition.diagnostics import offdiag_max
from compgen_jax.letters import data, evaluate
from compgen_jax.letters.zoo import Zoo


def pairs(cfg) -> list[list[str]]:
  """The expert pairs of compose.pairs."""
  return [list(p) for p in cfg.compose.pairs]


def pair_lambdas(cfg, num_experts: int) -> np.ndarray | None:
  """compose.lambdas, or weight 1 for every expert when it is empty (`compose.weights`; None
  for an operator without weights, the authors')."""
  lam = compose.weights(cfg.compose.operator, tuple(cfg.compose.lambdas) or None, num_experts)
  return None if lam is None else np.asarray(lam, np.float32)


class Ctx:
  """Config, trained models and the held-out test set (strings x [S, B, N], lengths [S, B])."""

  def __init__(self, cfg, zoo: Zoo):
    self.cfg, self.zoo, self.m = cfg, zoo, zoo.model
    self.keys = zoo.seed_keys
    self.x, self.len = evaluate.test_inputs(cfg, zoo.seed_keys, [cfg.data.train_len],
                                            cfg.data.test_size, "main")

  def p(self, task: str):
    return self.zoo.params[task]

  def compose_tokens(self, background, experts: list[str], lam=None, bg_model=None):
    """Decoded tokens [S, B, T] of experts composed over a background, with models, params."""
    models = (bg_model or self.m,) + (self.m,) * len(experts)
    params = (background,) + tuple(self.p(e) for e in experts)
    # forced positions (BOS, input letters, SEP) do not depend on the target table
    ref, forced, _ = evaluate.references(self.x, self.len, data.table([]), self.cfg.data.layout)
    tokens = evaluate.decode_all(self.cfg, models, params, ref, forced, lam, self.keys)
    return tokens, models, params

  def score(self, tokens, table_V) -> np.ndarray:
    """Exact match [S, B] of decoded tokens against `table_V` applied to the test strings."""
    ref = evaluate.references(self.x, self.len, table_V, self.cfg.data.layout)[0]
    return np.all(tokens == np.asarray(ref), axis=-1).astype(np.float32)

  def compose_em(self, background, experts: list[str], target_subs: list[str], lam=None,
                 bg_model=None):
    """Exact match [S, B] and decoded tokens of experts composed over a background."""
    tokens, models, params = self.compose_tokens(background, experts, lam, bg_model)
    return self.score(tokens, data.table(target_subs)), tokens, models, params

  def single_em(self, params, target_subs: list[str], x=None, ln=None):
    x, ln = (self.x, self.len) if x is None else (x, ln)
    return evaluate.exact_match(self.cfg, (self.m,), (params,), x, ln,
                                data.table(target_subs), None, self.keys)[0]

  def all_sources(self, subs: list[str]) -> np.ndarray:
    """[S, B]: test strings containing every source letter of `subs`."""
    return data.contains_all_sources(self.x, self.len, subs)


def em_row(ctx: Ctx, em_SxB: np.ndarray, subs: list[str], s: int, prefix: str = "exact_match"):
  """Exact match of seed s over all strings and over the strings containing every source
  letter (where every substitution has to act), with that subset's size."""
  mask = ctx.all_sources(subs)
  return {prefix: em_SxB[s].mean(), f"{prefix}_all_sources": evaluate.mean_where(em_SxB, mask)[s],
          "num_all_sources": int(mask[s].sum())}


def spec_row(cfg) -> dict:
  """The step spec the composition decoded with, in words (spec.describe: 'paper, eos=vote'),
  so that rows of evaluate-only passes with other specs say which they are."""
  return {"spec": spec_lib.describe(spec_lib.from_config(cfg.compose))}


def diag_row(d: dict, s: int) -> dict:
  """Seed s's diagnostics (`evaluate.diagnose`) as row fields; pairwise ones as the largest
  off-diagonal entry."""
  return {"mean_abs_log_z": d["mean_abs_log_z"][s], "max_abs_log_z": d["max_abs_log_z"][s],
          "overlap": offdiag_max(d["overlap_KxK"][s]), "ortho": offdiag_max(d["ortho_KxK"][s]),
          "ortho_cos": offdiag_max(d["ortho_cos_KxK"][s]), "tv_mask": d["tv_mask_K"][s],
          "tv_background": d["tv_background"][s], "active_frac": d["active_frac_K"][s],
          "mean_entropy_experts": d["mean_entropy_K"][s],
          **{k: d[k][s] for k in _STEP_FIELDS}}


# tail risk and log Z_t by the number of active experts (diagnostics.diagnose)
_STEP_FIELDS = ("mean_tail_boost", "max_tail_boost", "mean_unranked_mass", "max_unranked_mass",
                "unranked_pick_frac", "mean_abs_log_z_none", "mean_abs_log_z_one",
                "mean_abs_log_z_both", "mean_entropy_b")
