"""report.md, claims.json and the two figures of a Theorem 3.1 workdir, from its rows alone.

  python experiments/report.py --dir=results/cpu/theorem

reads <dir>/config.json, <dir>/theorem.jsonl (experiments/train.py on a theorem config) and an
optional <dir>/notes.md, and rewrites <dir>/report.md, claims.json, error_vs_resolution.png and
neurons_vs_modules.png. No model or checkpoint is read.
"""

import json
import math
import os

import numpy as np

from compgen_jax import files, metric_writer
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import aggregate, readings, registration, verdicts
from compgen_jax.analysis import claims as claims_table
from compgen_jax.analysis.markdown import table
from compgen_jax.theory import plots

EXPERIMENT = "theorem"  # its claims rows' experiment, and its rows in registration.ROWS
TABLE_FILE = "theorem.jsonl"  # the theory run's rows (experiments/train.py)
REPORT_FILE, CLAIMS_FILE = workdir_lib.REPORT_FILE, workdir_lib.CLAIMS_FILE
NOTES_FILE = "notes.md"
ERROR_PNG, COUNT_PNG = "error_vs_resolution.png", "neurons_vs_modules.png"
RATE, SLOWER_RATE = -2.0, -1.0  # the claimed exponent, and the one the interval must exclude

RULES = {
    "rate": f"**error ~ N^-2 under the bound**: shown when every measured sup error is at most "
            f"the paper's bound ||Omega||_inf I R^2 / (2 N^2) and the 95% t-interval, over the "
            f"random teachers, of the per-teacher least-squares slope of log sup error against "
            f"log N contains {RATE:g} and excludes {SLOWER_RATE:g}; partial when the bound holds "
            f"and the interval excludes {SLOWER_RATE:g} but not {RATE:g}; not shown when the bound "
            f"fails or the interval holds {SLOWER_RATE:g}; not judged with fewer than "
            f"{verdicts.MIN_SEEDS} teachers.",
    "count": "**neurons O(M + 1/sqrt(eps))**: shown when, at the fixed eps, the hidden layers "
             "(the products part) have the same width for every M, the total count grows by "
             "exactly one neuron per module (least-squares slope 1.000: the input layer), and the "
             "measured sup error at the N used is at most eps for every M; not shown otherwise. "
             "The 1/sqrt(eps) part is N = ceil(sqrt(||Omega|| I R^2 / (2 eps))), which suffices "
             "because the error falls as N^-2 under the bound (the first claim).",
}


def load(results_dir: str) -> tuple[dict, list[dict]]:
  """(config.json as a dict, the rows of theorem.jsonl)."""
  with open(os.path.join(results_dir, workdir_lib.CONFIG_FILE)) as f:
    cfg = json.load(f)
  return cfg, metric_writer.read_rows(os.path.join(results_dir, TABLE_FILE))


def _kind(rows: list[dict], kind: str) -> list[dict]:
  return [r for r in rows if r["kind"] == kind]


def teacher_slopes(rows: list[dict]) -> dict[int, float]:
  """Least-squares slope of log sup error against log N, per teacher."""
  err = _kind(rows, "error")
  out = {}
  for t in sorted({r["teacher"] for r in err}):
    rs = [r for r in err if r["teacher"] == t]
    n, e = (np.log([r[k] for r in rs]) for k in ("resolution", "sup_error"))
    out[t] = float(np.polyfit(n, e, 1)[0])
  return out


def pooled_slope(rows: list[dict]) -> verdicts.Interval | None:
  """One line through every teacher's points, each error divided by its teacher's N-free bound
  constant ||Omega|| I R^2 / 2 (= bound * N^2) to remove the teacher's level; t-interval, n - 2."""
  err = _kind(rows, "error")
  fit = aggregate.fit_power_law([r["resolution"] for r in err],
                                [r["sup_error"] / (r["bound"] * r["resolution"] ** 2) for r in err])
  return verdicts.exponent_interval(fit.exponent, fit.exponent_se, fit.n - 2)


def rate_verdict(rows: list[dict]) -> tuple[str, verdicts.Interval | None, bool]:
  """(verdict, interval of the mean slope over teachers, every error within the paper's bound)."""
  err = _kind(rows, "error")
  within = all(r["sup_error"] <= r["bound"] for r in err)
  interval = verdicts.mean_interval(list(teacher_slopes(rows).values()))
  if interval is None:
    return verdicts.NOT_JUDGED, None, within
  holds_rate = interval.low <= RATE <= interval.high
  holds_slower = interval.low <= SLOWER_RATE <= interval.high
  if not within or holds_slower:
    return verdicts.NOT_SHOWN, interval, within
  return (verdicts.SHOWN if holds_rate else verdicts.PARTIAL), interval, within


def count_verdict(rows: list[dict]) -> tuple[str, float]:
  """(verdict, least-squares slope of the total neuron count against M)."""
  count = sorted(_kind(rows, "count"), key=lambda r: r["num_modules"])
  if len(count) < 2:
    return verdicts.NOT_JUDGED, math.nan
  slope = float(np.polyfit([r["num_modules"] for r in count], [r["neurons"] for r in count], 1)[0])
  same_hidden = len({r["hidden_neurons"] for r in count}) == 1
  ok = same_hidden and abs(slope - 1.0) < 1e-6 and all(r["sup_error"] <= r["eps"] for r in count)
  return (verdicts.SHOWN if ok else verdicts.NOT_SHOWN), slope


def _g(v: float) -> str:
  return f"{v:.3g}"


def error_rows(rows: list[dict]) -> list[list]:
  return [[r["teacher"], r["resolution"], r["neurons"], _g(r["sup_error"]), _g(r["sharp_bound"]),
           _g(r["bound"]), f"{r['bound'] / r['sup_error']:.1f}"]
          for r in sorted(_kind(rows, "error"), key=lambda r: (r["teacher"], r["resolution"]))]


def doubling_ratio(rows: list[dict]) -> float:
  """Mean err(N) / err(2N) over teachers and N (4 for an exact N^-2)."""
  e = {(r["teacher"], r["resolution"]): r["sup_error"] for r in _kind(rows, "error")}
  ratios = [v / e[(t, 2 * n)] for (t, n), v in e.items() if (t, 2 * n) in e]
  return float(np.mean(ratios)) if ratios else math.nan


def count_rows(rows: list[dict]) -> list[list]:
  return [[r["num_modules"], r["resolution"], r["own_resolution"], r["hidden_neurons"],
           r["neurons"], r["num_tasks"], r["memorising_neurons"], _g(r["bound"]),
           _g(r["sup_error"]), r["eps"]]
          for r in sorted(_kind(rows, "count"), key=lambda r: r["num_modules"])]


def sgd_rows(rows: list[dict]) -> list[list]:
  return [[r["seed"], "x".join(map(str, r["widths"])), r["steps"], r["sgd/id/r2"],
           r["sgd/ood/r2"], r["constructed/id/r2"], r["constructed/ood/r2"]]
          for r in sorted(_kind(rows, "sgd"), key=lambda r: r["run"])]


# The construction is exact on every task: there is no training split, so no ID against OOD.
NO_SPLIT = "not applicable: a construction covers every task, no training split"


def _against(verdict: str) -> str:
  """The theorem states a bound and a rate: whether the measurement agrees."""
  return ("the theorem's bound and rate: " + readings.AGREES if verdict == verdicts.SHOWN
          else f"the theorem's bound and rate: ours {verdict}")


def claims(rows: list[dict]) -> list[dict]:
  """The claims.json records: the error rate under the bound, and the neuron count."""
  num_teachers = len(teacher_slopes(rows))
  verdict, interval, within = rate_verdict(rows)
  slope_text = interval.text() if interval else "-"
  pooled = pooled_slope(rows)
  rate = claims_table.claim(
      "The constructed network's sup error falls as N^-2 and stays under the bound "
      "||Omega||_inf * I * R^2 / (2 N^2)",
      "Theorem 3.1: sup error <= ||Omega||_inf I R^2 / (2 N^2) (verify numerically: error ~ N^-2)",
      f"slope of log sup error vs log N {slope_text} (mean over teachers, 95% t-interval); "
      f"every error under the bound: {'yes' if within else 'no'}; "
      f"mean err(N)/err(2N) {doubling_ratio(rows):.2f}",
      num_teachers, verdict, ERROR_PNG,
      RULES["rate"].replace("**", "") + (f" Pooled fit over all points: {pooled.text()}."
                                         if pooled else ""),
      composition=NO_SPLIT, against_paper=_against(verdict), rules=("theorem",))
  count = sorted(_kind(rows, "count"), key=lambda r: r["num_modules"])
  c_verdict, c_slope = count_verdict(rows)
  ours = (f"at eps {count[0]['eps']:g} with N = {count[0]['resolution']}: "
          f"{count[0]['hidden_neurons']} hidden neurons for every M in "
          f"{count[0]['num_modules']}..{count[-1]['num_modules']}, total = M + "
          f"{count[0]['neurons'] - count[0]['num_modules']} (slope {c_slope:.3f} per module); "
          f"max measured sup error {max(r['sup_error'] for r in count):.2g} <= eps"
          if count else "-")
  neurons = claims_table.claim(
      "The construction needs O(M + 1/sqrt(eps)) neurons, the products part independent of M",
      "Theorem 3.1: 2*I*H*N + H hidden units in layer 1, H in layer 2; total O(M + 1/sqrt(eps))",
      ours, len(count), c_verdict, COUNT_PNG,
      RULES["count"].replace("**", "") + " Seeds here: one random teacher per M. The counts are "
      "arithmetic of the construction; what is measured is that the N they use reaches eps.",
      composition=NO_SPLIT, against_paper=_against(c_verdict), rules=("theorem",))
  made = registration.rows_made(EXPERIMENT)
  return [claims_table.registered(c, EXPERIMENT, made) for c in (rate, neurons)]


def _setting(cfg: dict, rows: list[dict]) -> str:
  task, th = cfg["hyperteacher"]["task"], cfg["theorem"]
  err = _kind(rows, "error")
  summary = (_kind(rows, "summary") or [{}])[-1]
  lines = [
      f"- Teacher: hyperteacher, M={task['num_modules']}, K={task['max_hotness']}, "
      f"I={task['input_dim']}, H={task['hidden_dim']}, O={task['output_dim']}, one hidden layer, "
      f"{task['weights']} weights; {th['num_teachers']} random teachers (seed {cfg['seed']}).",
      f"- N (ReLU units per square): {', '.join(map(str, sorted(th['resolutions'])))}.",
      f"- Domain sample per teacher: {err[0]['num_latents'] if err else '-'} latents "
      f"(tasks x {th['weight_draws']} weight draws, the first at the all-ones vertex) x "
      f"{err[0]['num_inputs'] if err else '-'} inputs ({th['grid_points']}^I grid incl. corners + "
      f"{th['num_inputs']} uniform); the measured sup is a lower estimate of the true sup; "
      f"evaluated in {'float64' if th['float64'] else 'float32'}.",
      f"- Neuron count: eps = {th['eps']:g}, M in {', '.join(map(str, th['num_modules']))} "
      f"(one teacher per M, {th['count_max_tasks']} tasks sampled).",
  ]
  if th["sgd"]:
    lines.append(f"- SGD comparison: {cfg['hyperteacher']['num_seeds']} seeds, students of the "
                 f"constructed widths at N = {th['sgd_resolution']}, "
                 f"{cfg['hyperteacher']['train']['num_steps']} steps, lr "
                 f"{cfg['hyperteacher']['optim']['learning_rate']:g} "
                 f"({cfg['hyperteacher']['optim']['schedule']}), frac_ood "
                 f"{cfg['hyperteacher']['task']['frac_ood']}.")
  if "wall_s" in summary:
    lines.append(f"- Wall time of the experiment: {summary['wall_s']:.0f} s.")
  return "\n".join(lines)


def _registered(found: list[dict]) -> str:
  """Whether these rules came before the rows (each claim's registration.status)."""
  if all(c["registration"] == registration.POST_HOC for c in found):
    commits = ", ".join(sorted({c["rule_commit"] for c in found}))
    return (f"These rules were registered (commit {commits}) after the rows here were made: "
            f"the verdicts below are {registration.POST_HOC}.")
  return "Registration per claim: " + "; ".join(
      f"{c['claim']}: {c['registration']} (commit {c['rule_commit']})" for c in found) + "."


def render(cfg: dict, rows: list[dict], notes: str = "") -> str:
  """The report's markdown (write_report draws the figures and writes claims.json)."""
  verdict, interval, within = rate_verdict(rows)
  slopes = teacher_slopes(rows)
  pooled = pooled_slope(rows)
  c_verdict, c_slope = count_verdict(rows)
  under_sharp = all(r["sup_error"] <= r["sharp_bound"] for r in _kind(rows, "error"))
  sections = [
      "# Theorem 3.1: the explicit construction and its bounds, measured",
      "Regenerate (from config.json and theorem.jsonl in this directory): "
      "`python experiments/report.py --dir=results/cpu/theorem`. Construction and bounds: "
      "[docs/theory.md](../../../docs/theory.md).",
      notes,
      "## Setting",
      _setting(cfg, rows),
      "## Rules",
      "\n".join(f"- {RULES[k]}" for k in ("rate", "count")),
      registration.sentence(None) + " " + _registered(claims(rows)),
      "## Sup error vs N",
      f"![error vs N]({ERROR_PNG})",
      table(["teacher", "N", "neurons", "measured sup error", "sharp bound", "paper's bound",
             "paper's bound / measured"], error_rows(rows)),
      "Per-teacher slope of log sup error vs log N: "
      + ", ".join(f"{t}: {s:+.3f}" for t, s in slopes.items())
      + f". Mean over teachers with its 95% t-interval: "
      f"{interval.text() if interval else '-'}. Pooled fit (each error over its teacher's bound "
      f"constant, all points, n - 2 dof): {pooled.text() if pooled else '-'}. Mean "
      f"err(N)/err(2N): {doubling_ratio(rows):.2f} (4 for N^-2). Every error under the paper's "
      f"bound: {'yes' if within else 'no'}; under the sharp bound: "
      f"{'yes' if under_sharp else 'no'}.",
      f"Verdict: **{verdict}**.",
      "## Neurons vs M at fixed eps",
      f"![neurons vs M]({COUNT_PNG})",
      table(["M", "N used", "N this teacher needs", "hidden neurons", "neurons", "tasks T(M, K)",
             "T(M, K) x H", "paper's bound at N", "measured sup error", "eps"], count_rows(rows)),
      f"Least-squares slope of neurons vs M: {c_slope:.3f}. Verdict: **{c_verdict}**.",
  ]
  if _kind(rows, "sgd"):
    sections += [
        "## SGD at the constructed widths (not a claim of the paper)",
        "The theorem says such a network exists; whether SGD finds one is a separate question. "
        "Students of the constructed widths trained on the same teachers and random support, "
        "scored on the same ID and held-out draws as the constructed network:",
        table(["seed", "widths", "steps", "SGD ID R^2", "SGD OOD R^2", "constructed ID R^2",
               "constructed OOD R^2"], sgd_rows(rows)),
    ]
  sections += [
      "## Claims (claims.json)",
      table(["claim", "verdict", "ours", "rule registered"],
            [[c["claim"], c["verdict"], c["ours"], f"{c['registration']} ({c['rule_commit']})"]
             for c in claims(rows)]),
  ]
  return "\n\n".join(s for s in sections if s) + "\n"


def write_report(results_dir: str, out_dir: str | None = None) -> str:
  """Renders `results_dir` into out_dir (default results_dir); returns the report's path."""
  out_dir = out_dir or results_dir
  os.makedirs(out_dir, exist_ok=True)
  cfg, rows = load(results_dir)
  notes_path = os.path.join(results_dir, NOTES_FILE)
  notes = open(notes_path).read().strip() if os.path.exists(notes_path) else ""
  plots.error_vs_resolution(rows, os.path.join(out_dir, ERROR_PNG))
  plots.neurons_vs_modules(rows, os.path.join(out_dir, COUNT_PNG))
  files.write_text(os.path.join(out_dir, CLAIMS_FILE), claims_table.claims_json(claims(rows)))
  return files.write_text(os.path.join(out_dir, REPORT_FILE), render(cfg, rows, notes))

