"""The image report's claims (claims.json: the claims table's rows for paper 1's image
composition), judged from the runs' rows (images/analysis.collect) by the sweep reports' rules
(analysis/verdicts.py, analysis/correlations.py) with both readings (analysis/readings.py).
Their rules were registered in results/cpu/REGISTRATION.md after these runs were made: the
verdicts are post hoc, and each row says so."""

import math

from compgen_jax.analysis import aggregate, correlations, readings, verdicts
from compgen_jax.analysis import claims as claims_table
from compgen_jax.images import analysis

EXPERIMENT = "images"
POST_HOC = "post hoc: rule registered after the runs"
SUCCESS = aggregate.Metric(analysis.SUCCESS, "held-out success", "ood_success", "id/success",
                           bounds=(0.0, 1.0))
DECODABILITY = analysis.DECODABILITY[0]  # the report's main decodability (best layer, t = 1)
CLUSTER = ("program", "seed")  # the decodability rule's (program, seed) clusters
# This experiment's prototype (results/cpu/images/README.md), not the paper: (coverage, success)
PROTOTYPE = (0.5, 0.94)

RULES = {
    "rises": f"**held-out success rises with coverage**: at each width (program), "
             f"{verdicts.RULES['rises']}; {verdicts.RULES['per_seed']}; shown when every width "
             f"rises, partial by Holm.",
    "decodability": f"**decodability correlates with held-out success**: "
                    f"{verdicts.RULES['correlation']}, judged on the partial r of decodability "
                    f"({DECODABILITY}) with held-out success given ID success, its interval from "
                    f"{correlations.BOOTSTRAP_DRAWS} bootstrap resamples of whole (program, seed) "
                    f"clusters, not judged with fewer than {correlations.MIN_CLUSTERS} clusters.",
}


def _levels(rows: list[dict], program: str) -> list[tuple[float, dict]]:
  """[(coverage, {seed: held-out success})] of one program, coverage increasing."""
  out: dict = {}
  for r in rows:
    if r["program"] == program:
      out.setdefault(float(r["coverage"]), {})[r["seed"]] = float(r[analysis.SUCCESS])
  return sorted(out.items())


def _mean(rows: list[dict], program: str, coverage: float, key: str) -> float:
  return aggregate.summarize(aggregate.values(
      [r for r in rows if r["program"] == program and float(r["coverage"]) == coverage], key))[0]


def _falls(rows: list[dict], program: str) -> bool:
  """ID success lower at the most coverage than at the least (seed means)."""
  levels = [c for c, _ in _levels(rows, program)]
  return _mean(rows, program, levels[-1], "id/success") < _mean(rows, program, levels[0],
                                                                "id/success")


def _interval(values) -> str:
  m = verdicts.clipped(verdicts.mean_interval(list(values)), SUCCESS.bounds)
  return "-" if m is None else f"{m.estimate:.3f} [{m.low:.3f}, {m.high:.3f}]"


def rises_claim(rows: list[dict], figure: str) -> dict:
  """Held-out success rises with coverage, at every width."""
  programs = sorted({r["program"] for r in rows})
  judgements = {p: verdicts.rises([s for _, s in _levels(rows, p)]) for p in programs}
  verdict = verdicts.overall(list(judgements.values()))
  means = {p: " -> ".join(f"{sum(s.values()) / len(s):.3f}" for _, s in _levels(rows, p))
           for p in programs}
  top = max(float(r["coverage"]) for r in rows)
  at_top = [r for r in rows if float(r["coverage"]) == top]
  ids = {p: " -> ".join(f"{_mean(rows, p, c, 'id/success'):.3f}" for c, _ in _levels(rows, p))
         for p in programs}
  at_proto = {p: [r for r in rows if r["program"] == p
                  and math.isclose(float(r["coverage"]), PROTOTYPE[0])] for p in programs}
  best = max(programs, key=lambda p: _mean(rows, p, PROTOTYPE[0], analysis.SUCCESS)
             if at_proto[p] else -1.0)
  proto = (f"; this project's prototype (not the paper) reached {PROTOTYPE[1]:.2f} at "
           f"{PROTOTYPE[0]:g} coverage: ours "
           f"{_interval(aggregate.values(at_proto[best], analysis.SUCCESS))} ({best}), ID "
           f"success {_interval(aggregate.values(at_proto[best], 'id/success'))}"
           if at_proto[best] else "")
  return claims_table.claim(
      f"held-out composition success rises with coverage (the fraction of combinations "
      f"trained), at every width; {POST_HOC}",
      "rises (the paper's data-scaling claim; its image section, on large text-to-image "
      "models, has no coverage sweep)",
      "; ".join(f"{p}: {means[p]} (" + ("rises" if judgements[p].ok else
                                         f"{verdicts.word(judgements[p].ok)}: "
                                         f"{judgements[p].detail}") + ")" for p in programs),
      min((len(s) for p in programs for _, s in _levels(rows, p)), default=0), verdict, figure,
      RULES["rises"].replace("**", "") + " " + "; ".join(
          f"{p}: {j.detail}" for p, j in judgements.items()) + ".",
      composition=(f"at the most coverage ({top:g}): "
                   + readings.composition(at_top, SUCCESS)
                   + "; ID success by coverage " + "; ".join(f"{p}: {ids[p]}" for p in programs)
                   + (" (it falls at every width: the same steps fit more combinations, so the "
                      "rise is not fit)" if all(_falls(rows, p) for p in programs) else "")),
      against_paper=readings.paper_direction(verdict) + proto, rules=("images_rises",))


def decodability_claim(rows: list[dict], figure: str) -> dict:
  """Decodability of the prompt's constituents against held-out success, fit removed."""
  x = aggregate.values(rows, DECODABILITY)
  y = aggregate.values(rows, analysis.SUCCESS)
  clusters = [tuple(r.get(k) for k in CLUSTER) for r in rows]
  plain = correlations.clustered(x, y, clusters)
  given = correlations.clustered(x, y, clusters, aggregate.values(rows, "id/success"))
  gap = correlations.clustered(x, aggregate.gaps(rows, SUCCESS), clusters)
  judged = correlations.strong(given)
  verdict = verdicts.word(judged.ok)
  against = (readings.paper_direction(verdict) if judged.ok is not None else
             f"the paper gives a direction, no value: not judged here, {given.clusters} "
             f"(program, seed) clusters, fewer than {correlations.MIN_CLUSTERS} (a seed's runs "
             f"share their run key, and so their split draws, across coverages and widths)")
  return claims_table.claim(
      f"decodability of the prompt's constituents ({DECODABILITY}) correlates with held-out "
      f"composition success across runs; {POST_HOC}",
      "correlated (the paper's image section: probes on a text-to-image model's activations)",
      f"Pearson {correlations.text(plain)}; given ID: {correlations.text(given)}",
      min((len(s) for p in {r["program"] for r in rows} for _, s in _levels(rows, p)),
          default=0), verdict, figure, RULES["decodability"].replace("**", ""),
      composition=(f"partial r given ID {correlations.text(given)}; r with the gap ID - OOD "
                   f"{correlations.text(gap)}; " + readings.composition(rows, SUCCESS)),
      against_paper=against, rules=("images_decodability",))


def claims(rows: list[dict], rises_png: str, scatter_png: str) -> list[dict]:
  """The images' claims.json records."""
  return [dict(c, experiment=EXPERIMENT) for c in (rises_claim(rows, rises_png),
                                                   decodability_claim(rows, scatter_png))]
