"""Report section over task-support strategies: a bar per strategy and held-out fraction, and
each strategy set against the baseline the paper compares it with."""

import os

from compgen_jax.analysis import aggregate, figures, paper, readings, verdicts
from compgen_jax.analysis import claims as claims_table
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.aggregate import Group, Metric
from compgen_jax.analysis.verdicts import n_seeds
from compgen_jax.tasks import supports

KEYS = ("task.support", "task.max_hotness", "frac_ood")
MARGIN = (f"does not hurt: the 95% interval of the shortfall below the baseline ends under the "
          f"equivalence margin, {readings.EQUIVALENCE_FRACTION} x the smallest shortfall (seed "
          f"means) of the comparisons the paper calls a hurt that these runs show on the same "
          f"metric (contradicted when the interval starts above it; not judged in between); not "
          f"testable here when no hurt is shown, or when the margin is below the half-width the "
          f"interval would have with no shortfall and the baseline's own seed s.d. "
          f"(t_(n-1) s.d. sqrt(2 / n)): then no outcome could pass it")
# strategy -> (the baseline it is compared with, whether the paper says it hurts)
EXPECTED = {"pseudo_random_disconnected": ("random", True), "non_compositional": ("random", True),
            "unpopular_modules": ("random", True), "popular_modules": ("random", False),
            "disconnected": ("connected", True)}


def _label(g: Group) -> str:
  support, _, frac = g.key
  return "fixed split" if support in supports.IGNORE_FRAC else f"{frac:g}"


def _baseline(groups: list[Group], strategy: str, g: Group) -> Group | None:
  """The baseline's group at the same K and frac_ood, or, for a strategy that ignores frac_ood,
  the one with the nearest number of training tasks."""
  base, _ = EXPECTED[strategy]
  same_k = [b for b in groups if b.key[0] == base and b.key[1] == g.key[1]]
  if not same_k:
    return None
  if strategy in supports.IGNORE_FRAC or base in supports.IGNORE_FRAC:
    n_train = g.rows[0].get("n_train") or 0
    return min(same_k, key=lambda b: abs((b.rows[0].get("n_train") or 0) - n_train))
  return next((b for b in same_k if b.key[2] == g.key[2]), None)


def _verdicts(groups: list[Group], metric: Metric, fname: str) -> tuple[list[str], list[dict]]:
  """The paper's comparisons: every 'hurts' first (their shown shortfalls size the margin of
  'does not hurt'), listed in EXPECTED's order."""
  lines, claims, hurts = {}, {}, []
  for strategy, (base, hurt) in sorted(EXPECTED.items(), key=lambda kv: not kv[1][1]):
    pairs = [(g, _baseline(groups, strategy, g)) for g in groups if g.key[0] == strategy]
    pairs = [(g, b) for g, b in pairs if b is not None]
    if pairs:
      lines[strategy], claims[strategy] = _comparison(strategy, base, hurt, pairs, metric, fname,
                                                      hurts)
      if hurt and claims[strategy]["verdict"] == verdicts.SHOWN:
        hurts += [(b.mean - g.mean, f"{strategy} at {_label(g)}") for g, b in pairs]
  return [lines[s] for s in EXPECTED if s in lines], [claims[s] for s in EXPECTED if s in claims]


def _comparison(strategy: str, base: str, hurts: bool, pairs: list, metric: Metric, fname: str,
                shown: list[tuple[float, str]]) -> tuple[str, dict]:
  """One strategy against its baseline: its verdict line and claims record. `shown`: the
  (shortfall, where) of the hurts shown so far, for the margin of a 'does not hurt'."""
  sd = readings.seed_sd([aggregate.values(b.rows, metric.key) for _, b in pairs])
  seeds = min(min(g.n, b.n) for g, b in pairs)
  margin = readings.equivalence_margin([d for d, _ in shown])
  smallest = min(shown, default=None)
  why_not = (None if hurts else
             "no comparison the paper calls a hurt is shown here to size the margin"
             if not shown else None if readings.passable(margin, sd, seeds) else
             f"the margin {margin:.3f} is below the interval's half-width with no shortfall at "
             f"the baseline's seed s.d. {sd:.3f} over {seeds} seeds: no outcome could pass it")
  what = "clearly lower than" if hurts else f"not lower by more than {margin:.3f} than"
  judgements, details, untestable = [], [], []
  for g, b in pairs:
    # Same seeds, same task: paired by seed (verdicts.RULES["paired"]).
    a, ref = aggregate.by_seed(g.rows, metric.key), aggregate.by_seed(b.rows, metric.key)
    testable, base_text = readings.baseline_generalizes(b.rows, metric)
    if hurts and not testable:
      j = verdicts.Judgement(None, f"not testable here: the baseline fails too ({base_text})")
      untestable.append(_label(g))
    elif why_not:
      j = verdicts.Judgement(None, f"not testable here: {why_not}")
    else:
      j = verdicts.lower(a, ref) if hurts else verdicts.within(a, ref, round(margin, 3))
    judgements.append(j)
    details.append(f"{_label(g)}: {g.mean:.3f} vs {b.mean:.3f}, {md.word(j.ok)} ({j.detail})")
  word = (verdicts.NOT_TESTABLE if len(untestable) == len(pairs) or why_not
          else verdicts.overall(judgements))
  line = md.verdict(f"{metric.label}: {strategy} {what} {base}", word, "; ".join(details))
  gap = "; ".join(f"{_label(g)}: " + _gap_text(g, b, metric) for g, b in pairs)
  return line, claims_table.claim(
      f"{metric.label}: {strategy} support {'hurts' if hurts else 'does not hurt'} "
      f"(vs {base})", "hurts" if hurts else "does not hurt",
      "; ".join(f"{_label(g)}: {md.mean_sd(g.mean, g.sd)} vs {md.mean_sd(b.mean, b.sd)}"
                for g, b in pairs) + f" ({n_seeds(seeds)})", seeds, word, fname,
      f"settings compared: {verdicts.count(judgements)}"
      + ("" if hurts or not shown else f"; equivalence margin {margin:.3f} = "
         f"{readings.EQUIVALENCE_FRACTION} x the smallest shown hurt ({smallest[0]:.3f}, "
         f"{smallest[1]}); the baseline's seed s.d. {sd:.3f}")
      + (f"; not testable here: {why_not}" if why_not else "")
      + (f"; not testable at {', '.join(untestable)}: the baseline does not generalize "
         f"(OOD / ID < {readings.BASELINE_OF_ID}), so both fail" if untestable else ""),
      composition=f"gap (ID - OOD) of {strategy} minus the baseline's, per seed: {gap}",
      against_paper=readings.paper_direction(
          word, contradicts=not hurts and any(j.ok is False for j in judgements)),
      rules=("support",) if hurts else ("support", "margin"))


def _gap_text(g: Group, b: Group, metric: Metric) -> str:
  d = verdicts.difference(_gaps_by_seed(g, metric), _gaps_by_seed(b, metric))
  return "-" if d is None else d.text()


def _gaps_by_seed(g: Group, metric: Metric):
  ids, oods = aggregate.by_seed(g.rows, metric.id_key), aggregate.by_seed(g.rows, metric.key)
  if isinstance(ids, dict) and isinstance(oods, dict):
    return {s: ids[s] - oods[s] for s in ids}
  return aggregate.gaps(g.rows, metric)


def task_support(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """Bars per strategy and frac_ood with the paper's comparisons computed."""
  order = list(supports.STRATEGIES)
  parts = [md.claim(paper.CLAIMS["task_support"]),
           md.rules(verdicts.RULES["seeds"], verdicts.RULES["lower"], verdicts.RULES["paired"],
                    MARGIN, f"a comparison of a strategy that hurts needs a baseline that "
                    f"generalizes (seed-mean OOD / ID >= {readings.BASELINE_OF_ID}), else it is "
                    f"not testable here: two failures", verdicts.RULES["holm"],
                    "the baseline is the same K and frac_ood (a fixed split: the baseline run "
                    "with the nearest number of training tasks)", verdicts.RULES["fits"]), ""]
  tables, claims = {}, []
  for metric in metrics:
    groups = aggregate.group(rows, KEYS, metric.key)
    groups.sort(key=lambda g: (order.index(g.key[0]) if g.key[0] in order else len(order),
                               g.key[2]))
    tables[metric.key] = groups
    fname = f"task_support_{metric.slug}.png"
    parts.append(md.fits_check(rows, metric, verdicts.FITS_ID))
    lines, found = _verdicts(groups, metric, fname)
    parts += lines
    claims += found
    categories = list(dict.fromkeys(f"{g.key[0]} (K={g.key[1]})" for g in groups))
    bars: dict[str, list] = {}
    for g in groups:
      bars.setdefault(f"{g.key[0]} (K={g.key[1]})", []).append(figures.Bar(
          _label(g), g.mean, g.sd, g.n, f"n={g.rows[0].get('n_train')}",
          id_mean=aggregate.summarize(aggregate.values(g.rows, metric.id_key))[0]))
    seeds = min((g.n for g in groups), default=0)
    path = figures.bars_png(categories, bars, os.path.join(out_dir, fname), metric.label,
                            figures.caption(seeds), legend="frac_ood", chance=metric.chance)
    parts.append(md.figure(os.path.basename(path), f"{metric.label} per support",
                           f"{figures.caption(seeds)}; n = training tasks on each bar; "
                           f"ID as a black tick on each bar."))
  first = tables[metrics[0].key]
  body = [[g.key[0], g.key[1], _label(g), g.rows[0].get("n_train"), g.rows[0].get("n_ood"),
           *(c for m in metrics for c in md.cells(g.rows, m)), g.n] for g in first]
  parts.append("\n" + md.table(["support", "K", "frac_ood", "n_train", "n_ood",
                                *(h for m in metrics for h in md.cell_header(m)), "seeds"], body))
  return "\n".join(parts), claims
