"""Report section comparing students (transformer vs MLP) at matched parameter counts over the
number of training tasks. Parameter counts come from each workdir's config (shapes only)."""

import functools
import math
import os

import jax

from compgen_jax import passes
from compgen_jax import workdir as workdir_lib
from compgen_jax.analysis import aggregate, figures, paper, sections_data
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.aggregate import Metric
from compgen_jax.run_state import dims, vocab_size
from compgen_jax.students import registry as students

MATCHED = 0.05  # parameter counts within this relative difference count as matched


@functools.lru_cache(maxsize=256)
def num_params(workdir: str) -> int:
  """Parameters of the student a workdir trains (from config.json, nothing is allocated)."""
  cfg = workdir_lib.load_config(workdir)
  passes.fill_missing(cfg)
  enc_dim, x_dim, out_dim, _ = dims(cfg)
  shapes = jax.eval_shape(lambda key: students.init_params(
      cfg.student, key, enc_dim, x_dim, out_dim, vocab_size(cfg)), jax.random.key(0))
  return sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(shapes))


def _pairs(programs: dict[str, tuple[str, int]]) -> list[tuple[str, str, float]]:
  """Each transformer program with the MLP program closest in parameters: (tf, mlp, rel diff)."""
  mlps = [p for p, (s, _) in programs.items() if s == "mlp"]
  out = []
  for p, (student, n) in programs.items():
    if student == "transformer" and mlps:
      m = min(mlps, key=lambda q: abs(programs[q][1] - n))
      out.append((p, m, abs(programs[m][1] - n) / n))
  return out


def transformer_vs_mlp(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str) -> str:
  """OOD performance against n_train per student, with the computed comparisons."""
  programs = {r["program"]: (r.get("student.name"), num_params(r["workdir"])) for r in rows}
  parts = [md.claim(paper.CLAIMS["transformer_vs_mlp"])]
  pairs = _pairs(programs)
  if pairs:
    worst = max(d for _, _, d in pairs)
    parts.append(md.check(f"parameter counts matched within {MATCHED:.0%}", worst <= MATCHED,
                          "; ".join(f"{programs[t][1]:,} vs {programs[m][1]:,} ({d:.1%})"
                                    for t, m, d in pairs)))
  for metric in metrics:
    curves = aggregate.curves_by(rows, metric.key, ("program",))
    for tf, mlp, _ in pairs:
      above, total = _compare(curves[(tf,)], curves[(mlp,)])
      parts.append(md.check(f"{metric.label}: transformer above the MLP at most numbers of "
                            f"training tasks ({programs[tf][1]:,} parameters)",
                            above > total / 2 if total else None, f"{above} of {total}"))
    target = sections_data.pick_target(rows, metric.key, ("program",), "program")
    if target is not None:
      needed = sections_data.tasks_needed(rows, metric.key, ("program",), target)
      parts.append(f"- training tasks needed for {metric.label} >= {target}: " + "; ".join(
          f"{p}: {'<= ' if c.bound else ''}{c.x:.1f}" for (p,), c in needed.items()))
    series = [figures.Series(f"{programs[p][0]} ({programs[p][1]:,} params)", *line)
              for (p,), line in curves.items()]
    path = figures.curves_png([("", series)],
                              os.path.join(out_dir, f"transformer_vs_mlp_{metric.slug}.png"),
                              "number of training tasks", metric.label)
    parts.append(md.figure(os.path.basename(path), f"{metric.label} vs training tasks"))
  groups = {m.key: aggregate.group(rows, ("program", "n_train"), m.key) for m in metrics}
  body = [[g.key[0], programs[g.key[0]][0], f"{programs[g.key[0]][1]:,}", g.key[1],
           *(md.mean_sd(groups[m.key][i].mean, groups[m.key][i].sd) for m in metrics), g.n]
          for i, g in enumerate(groups[metrics[0].key])]
  parts.append("\n" + md.table(["program", "student", "parameters", "n_train",
                                *(m.label for m in metrics), "seeds"], body))
  return "\n".join(parts)


def _compare(tf: tuple, mlp: tuple) -> tuple[int, int]:
  """(numbers of training tasks where the transformer's mean is higher, shared ones)."""
  tf_means, mlp_means = dict(zip(tf[0], tf[1], strict=True)), dict(zip(mlp[0], mlp[1],
                                                                        strict=True))
  shared = [n for n in tf_means if n in mlp_means]
  return sum(tf_means[n] > mlp_means[n] for n in shared), len(shared)
