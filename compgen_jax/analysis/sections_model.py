"""Report sections over model settings: model size, the encoding table beside the paper's, and
decodability vs generalization. Each takes the sweep's run rows, the metrics (primary first)
and the output directory, and returns its markdown."""

import os

import numpy as np

from compgen_jax.analysis import aggregate, correlation, figures, load, paper, plots
from compgen_jax.analysis import markdown as md
from compgen_jax.analysis.aggregate import Metric

TASK_DECODER = load.DECODABILITY  # z at the best student layer (by ID probe R^2), OOD tasks
INPUT_DECODER = "z/input/ood_r2"  # z from phi(z) itself
STRONG_R = 0.7  # a Pearson r at least this large is called a strong correlation
GENERALIZES = 0.9  # an OOD R^2 at least this large is called generalizing


def _fraction(flags: list[bool]) -> tuple[bool | None, str]:
  return (all(flags) if flags else None), f"{sum(flags)} of {len(flags)}"


def model_size(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str) -> str:
  """OOD performance against width (one panel per encoding, a line per depth)."""
  keys = ("encoding.name", "student.depth", "student.width")
  parts = [md.claim(paper.CLAIMS["model_size"])]
  for metric in metrics:
    curves = aggregate.curves(rows, metric.key, "encoding.name", "student.depth", "student.width")
    widths_up, spearman_up = [], []
    for lines in curves.values():
      for xs, means, _ in lines.values():
        if len(xs) > 1:
          widths_up.append(aggregate.non_decreasing(means))
          rho = aggregate.spearman(xs, means)
          spearman_up.append(bool(rho > 0) if np.isfinite(rho) else means[-1] > means[0])
    deeper = []
    by_key = {g.key: g.mean for g in aggregate.group(rows, keys, metric.key)}
    for (enc, depth, width), mean in by_key.items():
      shallower = [m for (e, d, w), m in by_key.items() if e == enc and w == width and d < depth]
      if shallower:
        deeper.append(bool(mean >= max(shallower)))
    ok, detail = _fraction(widths_up)
    parts.append(md.check(f"{metric.label} monotone in width (every encoding and depth)", ok,
                          f"non-decreasing for {detail}"))
    ok, detail = _fraction(spearman_up)
    parts.append(md.check(f"{metric.label} rises with width (Spearman rho > 0; with two "
                          f"widths: the wider is higher)", ok, detail))
    ok, detail = _fraction(deeper)
    parts.append(md.check(f"{metric.label} at least as high for the deeper MLP at equal width",
                          ok, detail))
    panels = [(f"encoding: {enc}", [figures.Series(f"depth {d}", *line)
                                    for d, line in lines.items()])
              for enc, lines in curves.items()]
    path = figures.curves_png(panels, os.path.join(out_dir, f"model_size_{metric.slug}.png"),
                              "MLP width", metric.label, xscale="log2")
    parts.append(md.figure(os.path.basename(path), f"{metric.label} vs width"))
  parts.append("\n" + _model_table(rows, metrics, keys))
  return "\n".join(parts)


def _model_table(rows: list[dict], metrics: tuple[Metric, ...], keys: tuple[str, ...]) -> str:
  columns = [(m.label, m.key) for m in metrics]
  columns += [(label, key) for label, key in (("task decoder R^2", TASK_DECODER),
                                               ("input decoder R^2", INPUT_DECODER))
              if any(key in r for r in rows)]
  groups = {key: aggregate.group(rows, keys, key) for _, key in columns}
  body = []
  for i, g in enumerate(groups[columns[0][1]]):
    body.append([*g.key, *(md.mean_sd(groups[key][i].mean, groups[key][i].sd)
                           for _, key in columns), g.n])
  return md.table(["encoding", "depth", "width", *(label for label, _ in columns), "seeds"],
                  body)


def _table_model(rows: list[dict]) -> tuple[int, int]:
  """(width, depth) of the paper's table model if swept, else the deepest, then widest."""
  models = {(r.get("student.width"), r.get("student.depth")) for r in rows}
  wanted = (paper.TABLE_MODEL["student.width"], paper.TABLE_MODEL["student.depth"])
  return wanted if wanted in models else max(models, key=lambda m: (m[1] or 0, m[0] or 0))


def encoding_table(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str) -> str:
  """Per encoding: task decoder, input decoder and OOD R^2, ours beside the paper's."""
  del out_dir
  rows = [r for r in rows if r.get("encoding.name") in paper.ENCODING_TABLE]
  if not rows or metrics[0].key != "ood/r2":
    return ""
  width, depth = _table_model(rows)
  rows = [r for r in rows if (r.get("student.width"), r.get("student.depth")) == (width, depth)]
  setting = {k: rows[0].get(k) for k in paper.TABLE_SETTING}
  body, ours = [], {}
  for enc, (name, p_task, p_input, p_ood) in paper.ENCODING_TABLE.items():
    mine = [r for r in rows if r["encoding.name"] == enc]
    if not mine:
      continue
    stats = {k: aggregate.summarize(r.get(k) for r in mine)
             for k in (TASK_DECODER, INPUT_DECODER, "ood/r2")}
    ours[enc] = {k: v[0] for k, v in stats.items()}
    body.append([f"{name} (`{enc}`)", p_task, md.mean_sd(*stats[TASK_DECODER][:2]), p_input,
                 md.mean_sd(*stats[INPUT_DECODER][:2]), p_ood, md.mean_sd(*stats["ood/r2"][:2])])
  parts = [md.claim(paper.CLAIMS["encodings"]),
           *_encoding_checks(ours),
           f"\nOurs: MLP {depth}x{width}, M={setting['task.num_modules']}, "
           f"K={setting['task.max_hotness']}, frac_ood={setting['frac_ood']} (paper: M=16, K=3, "
           f"frac_ood=0.25, its default MLP 4x1024); mean ± s.d. over seeds.\n",
           md.table(["encoding", "task decoder R^2 (paper)", "task decoder R^2 (ours)",
                     "input decoder R^2 (paper)", "input decoder R^2 (ours)",
                     "OOD R^2 (paper)", "OOD R^2 (ours)"], body)]
  return "\n".join(parts)


def _encoding_checks(ours: dict) -> list[str]:
  ood = {enc: v["ood/r2"] for enc, v in ours.items()}
  worst = min(ood, key=lambda e: ood[e]) if ood else None
  task = {enc: v[TASK_DECODER] for enc, v in ours.items() if np.isfinite(v[TASK_DECODER])}
  low = min(task, key=lambda e: task[e]) if task else None
  lines = [md.check(f"every encoding generalizes (OOD R^2 >= {GENERALIZES})",
                    all(v >= GENERALIZES for v in ood.values()) if ood else None,
                    f"lowest {ood[worst]:.3f} for {worst}" if worst else ""),
           md.check(f"z linearly decodable from the hidden layers for every encoding (task "
                    f"decoder R^2 >= {GENERALIZES})",
                    all(v >= GENERALIZES for v in task.values()) if task else None,
                    f"lowest {task[low]:.3f} for {low}" if low else "no probes")]
  for i, (label, key) in enumerate((("task decoder R^2", TASK_DECODER),
                                    ("input decoder R^2", INPUT_DECODER), ("OOD R^2", "ood/r2"))):
    diffs = {enc: abs(v[key] - paper.ENCODING_TABLE[enc][i + 1]) for enc, v in ours.items()
             if np.isfinite(v[key])}
    if diffs:
      enc = max(diffs, key=diffs.get)
      lines.append(f"- largest |ours - paper| in {label}: {diffs[enc]:.3f} ({enc})")
  return lines


def _short(key: str) -> str:
  """'encoding.name' -> 'encoding', 'task.num_modules' -> 'M'."""
  return {"task.num_modules": "M", "task.max_hotness": "K"}.get(
      key, key.split(".")[0] if key.endswith(".name") else key.split(".")[-1])


def _group_label(rows: list[dict]) -> list[str]:
  """Per row, the setting that varies most usefully for colouring a scatter."""
  for keys in (("encoding.name",), ("task.num_modules", "task.max_hotness"), ("task.support",),
               ("student.name",)):
    labels = [", ".join(f"{_short(k)}={r.get(k)}" for k in keys) for r in rows]
    if len(set(labels)) > 1:
      return labels
  return [""] * len(rows)


def decodability(rows: list[dict], metrics: tuple[Metric, ...], out_dir: str) -> str:
  """Scatter of best-layer decodability of z against OOD performance, with Pearson r."""
  if not any(TASK_DECODER in r for r in rows):
    return ("No probes in this sweep's workdirs: re-run the sweep command with `--probe` "
            "(finished programs are only probed) for this section.")
  parts = [md.claim(paper.CLAIMS["decodability"])]
  for metric in metrics:
    corr = correlation.decodability_vs_generalization(rows, TASK_DECODER, metric.key)
    parts.append(md.check(f"strong positive correlation of task decodability with "
                          f"{metric.label} (Pearson r >= {STRONG_R})",
                          bool(corr["r"] >= STRONG_R) if corr["n"] >= 3 else None,
                          f"r = {corr['r']:.3f}, R^2 = {corr['r2']:.3f}, n = {corr['n']} runs"))
    if any(INPUT_DECODER in r for r in rows):
      inp = correlation.decodability_vs_generalization(rows, INPUT_DECODER, metric.key)
      parts.append(f"- for contrast, input decodability vs {metric.label}: r = {inp['r']:.3f} "
                   f"(n = {inp['n']})")
    path = plots.scatter_png(
        [load.number(r.get(TASK_DECODER)) for r in rows],
        [load.number(r.get(metric.key)) for r in rows],
        os.path.join(out_dir, f"decodability_{metric.slug}.png"),
        xlabel="task decoder R^2 (best hidden layer, OOD tasks)", ylabel=metric.label,
        title=f"Pearson r = {corr['r']:.3f} (n = {corr['n']})", groups=_group_label(rows))
    parts.append(md.figure(os.path.basename(path), f"decodability vs {metric.label}"))
  return "\n".join(parts)
