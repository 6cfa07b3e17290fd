"""The composition diagnostics of a scored llm workdir's composed decodes, per problem, and how
well each quantity predicts failure (issue 38, item 5):

  python experiments/evaluate.py --workdir=W     # W: an llm workdir the runner has scored

For each composition among W's systems that decodes with its operator alone (a gated, masked or
EOS-ruled one is skipped, and said so: the definitions below are the operator's), its rows
(`<benchmark>/<system>.jsonl`: the generated `tokens`, the finish reason, `correct`) are read
back; each member model scores the generated tokens teacher-forced after its own prompt, and
`composition.diagnostics.diagnose` (the definitions the letters use) runs on each problem's
generated steps. Written into W:
  diagnostics.jsonl          a row per problem: the quantities of diagnostics_rows.PREDICTORS
                             and per expert, which models rank EOS first at the step that ends
                             the sequence (`eos_first_M`, background first), `correct`, and how
                             far the decode's own |log Z| and active sets are from the
                             recomputed ones
  diagnostics_summary.jsonl  a row per benchmark and composition, pooled over generated tokens
                             (diagnostics_rows.summarize of this seed's rows)
  predictors.jsonl           a row per benchmark, composition and quantity of PREDICTORS: the
                             AUC of the quantity for failure with its bootstrap interval over
                             problems and p-value of AUC = 0.5 (diagnostics_rows.predictors),
                             or not testable
`experiments/report.py --dir=W` adds the summary, predictors and their verdicts to W's report.md
(llm_eval/evaluate_report.py's section of llm_eval/report.py), recomputed from the
diagnostics.jsonl of every seed scored in W (seed s's in W/seed_<s>/), pooled over seeds; the
llm_study pipeline runs this pass as a stage after each seed's scoring, then that seed's report
and its split's.
Only the decode enters the quantities (no score), so each could be read before scoring.
"""

import functools
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from compgen_jax import metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.composition import diagnostics
from compgen_jax.composition import spec as spec_lib
from compgen_jax.llm_eval import (
  benchmarks,
  decoding,
  diagnostics_rows,
  evaluate_report,
  runner,
  systems,
)
from compgen_jax.lm.model import Model, forward
from compgen_jax.types import Array, ConfigError, DataError, PyTree

TAIL_LOGP = -6.9  # diagnostics.tail_risk's tail: tokens with p_b < 1e-3


def operator_alone(system: systems.System) -> bool:
  """Whether a composition decodes with its operator alone (no mask, gate or EOS rule)."""
  step = spec_lib.from_config(system.compose)
  return (step.mask, step.gate, step.eos) == (spec_lib.PAPER.mask, spec_lib.PAPER.gate,
                                              spec_lib.PAPER.eos)


@functools.partial(jax.jit, static_argnames=("model",))
def step_logps(model: Model, params: PyTree, tokens_BxL: Array, valid_BxL: Array,
               pos_BxN: Array) -> Array:
  """The model's next-token log-probs [B, N, V] at positions pos_BxN, teacher-forced."""
  logp_BxLxV = jax.nn.log_softmax(
      forward(model, params, tokens_BxL, valid_BxL).astype(jnp.float32), axis=-1)
  return jax.vmap(lambda lp_LxV, pos_N: lp_LxV[pos_N])(logp_BxLxV, pos_BxN)


@functools.partial(jax.jit, static_argnames=("operator", "kl_threshold"))
def per_problem(logp_MxBxNxV: Array, valid_BxN: Array, lam_K: Array | None, *, operator: str,
                kl_threshold: float) -> dict[str, Array]:
  """`diagnostics.diagnose` of each problem alone (vmapped over B), each model's argmax token
  top_MxBxN, and the mean KL per expert over a problem's valid steps."""
  def one(logp_MxNxV, valid_N):
    d = diagnostics.diagnose(logp_MxNxV[0][None], logp_MxNxV[1:, None], valid_N[None], lam_K,
                             kl_threshold, tail_logp=TAIL_LOGP, operator=operator)
    num_valid = jnp.maximum(valid_N.sum(), 1)
    d["mean_kl_K"] = jnp.sum(d["kl_KxBxT"][:, 0] * valid_N[None], axis=-1) / num_valid
    d["active_KxN"], d["log_z_N"] = d["active_KxBxT"][:, 0], d["log_z_BxT"][0]
    return {k: v for k, v in d.items() if not k.endswith("BxT")}
  out = jax.vmap(one, in_axes=(1, 0))(logp_MxBxNxV, valid_BxN)
  out["top_MxBxN"] = jnp.argmax(logp_MxBxNxV, axis=-1)
  return out


def _inputs(sp, models, system, problems, rows, num_new: int):
  """Per member model, right-padded [B, L] prompt + generated tokens, validity, and the
  positions [B, N] whose next token is generated token n; validity [B, N] of the steps."""
  templates = system.templates or (systems.PROMPT,) * len(models)
  out = []
  for model, template in zip(models, templates, strict=True):
    prompts = [decoding.encode(sp, model.bos_id, systems.apply_template(template, p.prompt))
               for p in problems]
    seqs = [pr + r["tokens"] for pr, r in zip(prompts, rows, strict=True)]
    length = -(-max(map(len, seqs)) // 64) * 64
    tokens = np.full((len(seqs), length), model.pad_id, np.int32)
    valid = np.zeros((len(seqs), length), bool)
    for i, s in enumerate(seqs):
      tokens[i, :len(s)], valid[i, :len(s)] = s, True
    pos = np.asarray([[len(pr) - 1 + min(n, len(r["tokens"]) - 1) for n in range(num_new)]
                      for pr, r in zip(prompts, rows, strict=True)], np.int32)
    out.append((tokens, valid, pos))
  steps = np.arange(num_new)[None] < np.asarray([len(r["tokens"]) for r in rows])[:, None]
  return out, steps


def system_rows(cfg, loaded: systems.Loaded, system: systems.System, bench: str,
                problems: dict, rows: list[dict]) -> list[dict]:
  """A diagnostics row per scored problem of one composition on one benchmark."""
  models, params = systems.system_params(cfg, loaded, system)
  step_spec = spec_lib.from_config(system.compose)
  lam_K = decoding.expert_weights(step_spec, system.compose, system.weights, len(models) - 1)
  eos_id, out = models[0].eos_id, []
  for start in range(0, len(rows), cfg.generate.batch_size):
    batch = rows[start:start + cfg.generate.batch_size]
    inputs, steps_BxN = _inputs(loaded.tokenizer, models, system,
                                [problems[r["id"]] for r in batch], batch,
                                cfg.generate.max_new_tokens)
    logp = jnp.stack([step_logps(m, p, *x) for m, p, x in zip(models, params, inputs,
                                                                strict=True)])
    d = jax.device_get(per_problem(logp, jnp.asarray(steps_BxN), lam_K, operator=step_spec.operator,
                                   kl_threshold=float(system.compose.kl_threshold)))
    for b, r in enumerate(batch):
      out.append(_row(system, bench, r, {k: v[b] for k, v in d.items() if k != "top_MxBxN"},
                      d["top_MxBxN"][:, b], eos_id))
  return out


def _row(system, bench: str, r: dict, d: dict, top_MxN: np.ndarray, eos_id: int) -> dict:
  n = len(r["tokens"])
  active_K = d["active_KxN"][:, :n].sum(axis=1)
  return {
      "step": 0, "benchmark": bench, "system": system.name, "id": r["id"],
      "members": list(system.members), "correct": bool(r["correct"]), "finish": r["finish"],
      "num_tokens": n, "hits_budget": float(r["finish"] == "budget"),
      "active_frac_K": d["active_frac_K"].tolist(),
      "active_frac": float(d["active_frac_K"].mean()),
      "overlap_KxK": d["overlap_KxK"].tolist(),
      "overlap": float(diagnostics.offdiag_max(d["overlap_KxK"])),
      "mean_kl_K": d["mean_kl_K"].tolist(), "mean_kl": float(d["mean_kl_K"].mean()),
      **{k: float(d[k]) for k in ("mean_abs_log_z", "max_abs_log_z", "mean_tail_boost",
                                  "max_tail_boost", "unranked_pick_frac",
                                  "mean_unranked_mass")},
      # the models whose own argmax is EOS at the step that emitted it (None: no EOS)
      "eos_first_M": (top_MxN[:, n - 1] == eos_id).tolist() if r["finish"] == "eos" else None,
      # the decode's own records against the teacher-forced ones (rounding: ~1e-5)
      "decode_log_z_gap": abs(float(np.abs(d["log_z_N"][:n]).sum()) - r["sum_abs_log_z"]) / n,
      "decode_active_gap": int(np.abs(active_K - np.asarray(r["active_K"])).sum()),
  }


def diagnosable(resolved: list[systems.System]) -> list[systems.System]:
  """The compositions among the systems that the pass diagnoses (those decoding with their
  operator alone); ConfigError naming `systems` when there is none."""
  composed = [s for s in resolved if s.kind == "composed"]
  usable = [s for s in composed if operator_alone(s)]
  if not usable:
    raise ConfigError("systems", "no composition that decodes with its operator alone to "
                      f"diagnose (compositions: {', '.join(s.name for s in composed) or 'none'})")
  return usable


def _scored_rows(workdir: str, bench: str, system: systems.System) -> list[dict]:
  path = os.path.join(workdir, bench, f"{system.name}.jsonl")
  rows = sorted(metric_writer.read_rows(path), key=lambda r: r["id"])
  if not rows:
    raise DataError(f"{path}: no scored rows (run the workdir's scoring first)")
  if any("tokens" not in r for r in rows):
    raise DataError(f"{path}: rows without generated `tokens` (scored before the runner "
                    "recorded them): score again into a fresh workdir")
  return rows


def run(cfg: ml_collections.ConfigDict, workdir: str) -> str:
  """Writes the three files into `workdir`; returns the summary and predictor tables."""
  resolved = runner.validate(cfg)
  composed = [s for s in resolved if s.kind == "composed"]
  usable = diagnosable(resolved)
  scored = {(b, s.name): _scored_rows(workdir, b, s) for b in cfg.run for s in usable}
  problems = {b: benchmarks.BENCHMARKS[b].load(cfg.benchmarks[b]) for b in cfg.run}
  names = systems.needed_models(usable)
  loaded = systems.load(cfg, runner.model_paths(cfg, workdir, names, problems), names, workdir)
  rows = []
  for b in cfg.run:
    by_id = {p.id: p for p in problems[b]}
    for s in usable:
      rows += system_rows(cfg, loaded, s, b, by_id, scored[b, s.name])
  summary, preds = diagnostics_rows.summarize(rows), diagnostics_rows.predictors(rows)
  for name, table in ((workdir_lib.DIAGNOSTICS_FILE, rows),
                      (workdir_lib.DIAGNOSTICS_SUMMARY_FILE, summary),
                      (workdir_lib.PREDICTORS_FILE, preds)):
    metric_writer.replace_step_rows(os.path.join(workdir, name), 0, table)
  skipped = [f"{s.name} ({spec_lib.describe(spec_lib.from_config(s.compose))})"
             for s in composed if s not in usable]
  return "\n\n".join([evaluate_report.summary_table(summary),
                      evaluate_report.predictors_table(preds),
                      evaluate_report.verdict_table(preds)]
                     + ([f"skipped (not the operator alone): {', '.join(skipped)}"]
                        if skipped else []))

