"""Report section over task-support strategies: a bar per strategy and held-out fraction, and
each strategy set against the baseline the paper compares it with."""

import math
import os

from compgen_jax.analysis import aggregate, figures, paper
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.aggregate import Group, Metric
from compgen_jax.tasks import supports

KEYS = ("task.support", "task.max_hotness", "frac_ood")
MARGIN = 0.01  # a difference must exceed the two seed spreads plus this to count as a change
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


def _verdicts(groups: list[Group], metric: Metric) -> list[str]:
  lines = []
  for strategy, (base, hurts) in EXPECTED.items():
    pairs = [(g, _baseline(groups, strategy, g)) for g in groups if g.key[0] == strategy]
    pairs = [(g, b) for g, b in pairs if b is not None and math.isfinite(g.mean + b.mean)]
    if not pairs:
      continue
    gaps = [b.mean - g.mean - (g.sd + b.sd) for g, b in pairs]  # > MARGIN: clearly lower
    if hurts:
      ok, what = all(gap > MARGIN for gap in gaps), "clearly lower than"
    else:
      ok = all(g.mean >= b.mean - (g.sd + b.sd) - MARGIN for g, b in pairs)
      what = "not clearly lower than"
    detail = "; ".join(f"{_label(g)}: {g.mean:.3f} vs {b.mean:.3f}" for g, b in pairs)
    lines.append(md.check(f"{metric.label}: {strategy} {what} {base}", ok, detail))
  return lines


def task_support(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str) -> str:
  """Bars per strategy and frac_ood with the paper's comparisons computed."""
  order = list(supports.STRATEGIES)
  parts = [md.claim(paper.CLAIMS["task_support"])]
  tables = {}
  for metric in metrics:
    groups = aggregate.group(rows, KEYS, metric.key)
    groups.sort(key=lambda g: (order.index(g.key[0]) if g.key[0] in order else len(order),
                               g.key[2]))
    tables[metric.key] = groups
    parts += _verdicts(groups, metric)
    categories = list(dict.fromkeys(f"{g.key[0]} (K={g.key[1]})" for g in groups))
    bars: dict[str, list] = {}
    for g in groups:
      bars.setdefault(f"{g.key[0]} (K={g.key[1]})", []).append((_label(g), g.mean, g.sd))
    path = figures.bars_png(categories, bars,
                            os.path.join(out_dir, f"task_support_{metric.slug}.png"),
                            metric.label, "mean ± s.d. over seeds", legend="frac_ood")
    parts.append(md.figure(os.path.basename(path), f"{metric.label} per support"))
  parts.append(f"\n'Clearly lower': below the baseline by more than both seed spreads plus "
               f"{MARGIN}; the baseline is the same K and frac_ood (a fixed split: the baseline "
               f"run with the nearest number of training tasks).\n")
  first = tables[metrics[0].key]
  body = [[g.key[0], g.key[1], _label(g), g.rows[0].get("n_train"), g.rows[0].get("n_ood"),
           *(md.mean_sd(tables[m.key][i].mean, tables[m.key][i].sd) for m in metrics), g.n]
          for i, g in enumerate(first)]
  parts.append(md.table(["support", "K", "frac_ood", "n_train", "n_ood",
                         *(m.label for m in metrics), "seeds"], body))
  return "\n".join(parts)
