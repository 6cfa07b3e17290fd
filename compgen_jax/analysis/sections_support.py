"""Report section over task-support strategies: a bar per strategy and held-out fraction, and
each strategy set against the baseline the paper compares it with."""

import os

from compgen_jax.analysis import aggregate, figures, paper, verdicts
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.aggregate import Group, Metric
from compgen_jax.analysis.verdicts import n_seeds
from compgen_jax.tasks import supports

KEYS = ("task.support", "task.max_hotness", "frac_ood")
# "Does not hurt": the 95% interval of the shortfall below the baseline ends under this.
TOLERANCE = 0.05
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
  lines, claims = [], []
  for strategy, (base, hurts) in EXPECTED.items():
    pairs = [(g, _baseline(groups, strategy, g)) for g in groups if g.key[0] == strategy]
    pairs = [(g, b) for g, b in pairs if b is not None]
    if not pairs:
      continue
    what = "clearly lower than" if hurts else f"not lower by more than {TOLERANCE} than"
    oks, details = [], []
    for g, b in pairs:
      # Same seeds, same task: paired by seed (verdicts.RULES["paired"]).
      a, ref = aggregate.by_seed(g.rows, metric.key), aggregate.by_seed(b.rows, metric.key)
      j = verdicts.lower(a, ref) if hurts else verdicts.within(a, ref, TOLERANCE)
      oks.append(j.ok)
      details.append(f"{_label(g)}: {g.mean:.3f} vs {b.mean:.3f}, {md.word(j.ok)} ({j.detail})")
    word = verdicts.overall(oks)
    lines.append(md.verdict(f"{metric.label}: {strategy} {what} {base}", word,
                            "; ".join(details)))
    seeds = min(min(g.n, b.n) for g, b in pairs)
    claims.append(verdicts.claim(
        f"{metric.label}: {strategy} support {'hurts' if hurts else 'does not hurt'} "
        f"(vs {base})", "hurts" if hurts else "does not hurt",
        "; ".join(f"{_label(g)}: {md.mean_sd(g.mean, g.sd)} vs {md.mean_sd(b.mean, b.sd)}"
                  for g, b in pairs) + f" ({n_seeds(seeds)})", seeds, word, fname,
        f"settings compared: {verdicts.count(oks)}"))
  return lines, claims


def task_support(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str):
  """Bars per strategy and frac_ood with the paper's comparisons computed."""
  order = list(supports.STRATEGIES)
  parts = [md.claim(paper.CLAIMS["task_support"]),
           md.rules(verdicts.RULES["seeds"], verdicts.RULES["lower"], verdicts.RULES["paired"],
                    f"A does not hurt when the upper end of the 95% Welch interval of "
                    f"mean(baseline) - mean(A) is below {TOLERANCE} (it hurts when the lower "
                    f"end is above {TOLERANCE}; not judged in between)",
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
          _label(g), g.mean, g.sd, g.n, f"n={g.rows[0].get('n_train')}"))
    seeds = min((g.n for g in groups), default=0)
    path = figures.bars_png(categories, bars, os.path.join(out_dir, fname), metric.label,
                            figures.caption(seeds), legend="frac_ood", chance=metric.chance)
    parts.append(md.figure(os.path.basename(path), f"{metric.label} per support",
                           f"{figures.caption(seeds)}; n = training tasks on each bar."))
  first = tables[metrics[0].key]
  body = [[g.key[0], g.key[1], _label(g), g.rows[0].get("n_train"), g.rows[0].get("n_ood"),
           *(c for m in metrics for c in md.cells(g.rows, m)), g.n] for g in first]
  parts.append("\n" + md.table(["support", "K", "frac_ood", "n_train", "n_ood",
                                *(h for m in metrics for h in md.cell_header(m)), "seeds"], body))
  return "\n".join(parts), claims
