"""Correlations across runs for the sweep report: Pearson r (partial r given covariates) with its
Fisher-z interval, the same with an interval from a bootstrap that resamples whole clusters of
runs (a setting's seeds share their teacher, so runs are not independent), and the strong-
correlation rule (verdicts.RULES['correlation']). Also the AUC of a score as a predictor of a
binary outcome, with a bootstrap interval and p-value from the same resampling settings (of
items, or of whole clusters of them)."""

import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from compgen_jax.analysis import verdicts

BOOTSTRAP_DRAWS = 2000  # resamples of the clusters; the generator's seed is fixed (byte-stable)
BOOTSTRAP_SEED = 0
# A percentile interval over fewer clusters than this covers too little (a handful of clusters
# cannot show the spread between them): the correlation is then not judged.
MIN_CLUSTERS = 10
# An AUC is not computed with fewer positives or negatives than this (fixed before any run:
# with fewer, most resamples hold one or two of the rare class and the interval means little).
MIN_CLASS = 5


def resample_counts(n: int, rng: np.random.Generator, draws: int = BOOTSTRAP_DRAWS
                    ) -> np.ndarray:
  """[draws, n] bootstrap resamples of n items as counts (how often each item is drawn)."""
  picks = rng.integers(0, n, size=(draws, n))
  return np.stack([np.bincount(p, minlength=n) for p in picks])


def cluster_of(labels) -> np.ndarray:
  """Each item's cluster as an index into its labels' distinct values (as text), numbered in
  the order the items first give them."""
  index: dict[str, int] = {}
  return np.asarray([index.setdefault(str(v), len(index)) for v in labels], np.int64)


def cluster_counts(of_items: np.ndarray, draws: int = BOOTSTRAP_DRAWS) -> np.ndarray:
  """[draws, items] counts of a bootstrap that resamples whole clusters (`cluster_of`): each
  item weighs its cluster's count; the generator is BOOTSTRAP_SEED's. Clusters of one item
  each (0, 1, ..., n - 1) give resample_counts(n) itself."""
  num = int(of_items.max()) + 1 if of_items.size else 0
  return resample_counts(num, np.random.default_rng(BOOTSTRAP_SEED), draws)[:, of_items]


def percentile_interval(draws: np.ndarray) -> tuple[float, float]:
  """The LEVEL percentile interval of a statistic's bootstrap draws."""
  low, high = np.quantile(draws, [(1 - verdicts.LEVEL) / 2, (1 + verdicts.LEVEL) / 2])
  return float(low), float(high)


class Correlation(NamedTuple):
  r: float
  low: float
  high: float
  n: int  # finite pairs
  given: int  # covariates partialled out
  clusters: int = 0  # clusters resampled for the interval (0: Fisher-z interval)


def _usable(x, y, covariates):
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  c = np.zeros((x.size, 0)) if covariates is None else np.asarray(covariates, np.float64)
  c = c.reshape(x.size, c.shape[1] if c.ndim == 2 else c.ndim)  # a 1-d column: one covariate
  ok = np.isfinite(x) & np.isfinite(y) & np.all(np.isfinite(c), axis=1)
  return x[ok], y[ok], c[ok], ok


def _partial_r(x, y, c) -> float:
  """r of x and y each residualised on [1, c] (NaN without spread)."""
  design = np.concatenate([np.ones((x.size, 1)), c], axis=1)
  rx = x - design @ np.linalg.lstsq(design, x, rcond=None)[0]
  ry = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
  if np.std(rx) < 1e-12 or np.std(ry) < 1e-12:
    return math.nan
  return float(np.clip(np.corrcoef(rx, ry)[0, 1], -1.0, 1.0))


def correlation(x, y, covariates=None) -> Correlation:
  """Pearson r of x and y (partial r given the covariate columns, each residualised on them
  with an intercept) with its 95% Fisher-z interval; NaN with too few pairs or no spread."""
  x, y, c, _ = _usable(x, y, covariates)
  n, k = int(x.size), c.shape[1]
  r = _partial_r(x, y, c) if n - 3 - k >= 1 else math.nan
  if not math.isfinite(r):
    return Correlation(math.nan, math.nan, math.nan, n, k)
  z, half = np.arctanh(np.clip(r, -0.999999, 0.999999)), (
      stats.norm.ppf(0.5 + verdicts.LEVEL / 2) / math.sqrt(n - 3 - k))
  return Correlation(r, float(np.tanh(z - half)), float(np.tanh(z + half)), n, k)


def clustered(x, y, clusters: list, covariates=None) -> Correlation:
  """The partial r of `correlation` with a 95% percentile interval from BOOTSTRAP_DRAWS
  resamples of whole clusters (runs sharing a cluster label are drawn together); no interval
  (NaN ends) with fewer than MIN_CLUSTERS clusters. Resamples without spread are skipped."""
  x, y, c, ok = _usable(x, y, covariates)
  labels = np.asarray([str(v) for v in clusters])[ok]
  point = correlation(x, y, c)
  num_clusters = len(set(labels))
  if not math.isfinite(point.r) or num_clusters < MIN_CLUSTERS:
    return Correlation(point.r, math.nan, math.nan, point.n, point.given, num_clusters)
  # A resample is a count per cluster; each run weighs its cluster's count, and the partial r
  # of every resample comes at once from its weighted covariance matrix S of [x, y, c]: the
  # covariance of x and y given c is S_xy - S_xc S_cc^-1 S_cy (only S_cc is inverted).
  w = cluster_counts(cluster_of(labels)).astype(np.float64)  # [draws, runs]
  data = np.concatenate([x[:, None], y[:, None], c], axis=1)  # [runs, 2 + k]
  mean = w @ data / w.sum(1, keepdims=True)
  centred = data[None] - mean[:, None]
  cov = np.einsum("br,bri,brj->bij", w, centred, centred)
  k = c.shape[1]
  stable = (w > 0).sum(1) - 3 - k >= 1
  if k:
    s_cc = cov[:, 2:, 2:]
    stable &= np.linalg.cond(s_cc) < 1e12
    s_cc = np.where(stable[:, None, None], s_cc, np.eye(k))
    cov = cov[:, :2, :2] - cov[:, :2, 2:] @ np.linalg.solve(s_cc, cov[:, 2:, :2])
  with np.errstate(invalid="ignore", divide="ignore"):
    draws = (cov[:, 0, 1] / np.sqrt(cov[:, 0, 0] * cov[:, 1, 1]))[stable]
  draws = np.clip(draws[np.isfinite(draws)], -1.0, 1.0)
  if draws.size < BOOTSTRAP_DRAWS // 2:
    return Correlation(math.nan, math.nan, math.nan, point.n, point.given, num_clusters)
  low, high = percentile_interval(draws)
  return Correlation(point.r, low, high, point.n, point.given, num_clusters)


def text(c: Correlation) -> str:
  """'r = 0.288 [0.020, 0.518], 54 runs (27 clusters)'."""
  if not math.isfinite(c.r):
    return f"undefined ({c.n} runs" + (f", {c.clusters} clusters)" if c.clusters else ")")
  if not math.isfinite(c.low):
    return (f"r = {c.r:.3f}, no interval ({c.n} runs, {c.clusters} clusters: fewer than "
            f"{MIN_CLUSTERS})")
  return (f"r = {c.r:.3f} [{c.low:.3f}, {c.high:.3f}], {c.n} runs"
          + (f" ({c.clusters} clusters)" if c.clusters else ""))


def strong(c: Correlation, bar: float = verdicts.CORRELATION_BAR) -> verdicts.Judgement:
  """A strong positive correlation: the interval's lower end at least `bar`."""
  if not math.isfinite(c.low):
    return verdicts.Judgement(None, text(c))
  return verdicts.Judgement(bool(c.low >= bar), text(c))


class Auc(NamedTuple):
  auc: float  # NaN: not testable (fewer than MIN_CLASS positives or negatives)
  low: float
  high: float
  positives: int  # finite scores of each class
  negatives: int
  p: float = math.nan  # two-sided bootstrap p-value of AUC = 0.5 (NaN: not testable)


def _pair_matrix(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
  """[positives, negatives]: 1 where the positive scores higher, 1/2 on a tie, else 0."""
  return (pos[:, None] > neg[None]) + 0.5 * (pos[:, None] == neg[None])


def auc(scores, positive, clusters=None) -> Auc:
  """The area under the ROC curve of `scores` for the `positive` labels (the Mann-Whitney U over
  positives x negatives: the chance a positive outscores a negative, ties counting 1/2), with
  a 95% percentile interval from BOOTSTRAP_DRAWS resamples of the items, or with `clusters`
  (a label per item) of whole clusters, every item of a drawn cluster drawn with it
  (resamples lacking a class are skipped). Items with a non-finite score are left out; NaN
  throughout when either class has fewer than MIN_CLASS items. Clusters of one item each give
  the interval without clusters, draw for draw. `p` is the two-sided bootstrap p-value of
  AUC = 0.5 from the same draws: min(1, 2 min(fraction of draws <= 0.5, fraction >= 0.5))
  (0 when every draw lies on one side of 0.5, 1 when the draws straddle it evenly or all equal
  it), what verdicts.holm reads."""
  s, y = np.asarray(scores, np.float64), np.asarray(positive, bool)
  if s.shape != y.shape or s.ndim != 1:
    raise ValueError(f"scores {s.shape} and labels {y.shape} must be one vector each")
  if clusters is not None and len(clusters) != s.size:
    raise ValueError(f"{len(clusters)} cluster labels for {s.size} scores")
  ok = np.isfinite(s)
  s, y = s[ok], y[ok]
  of_items = (np.arange(s.size) if clusters is None else
              cluster_of(np.asarray([str(v) for v in clusters])[ok]))
  n_pos, n_neg = int(y.sum()), int((~y).sum())
  if min(n_pos, n_neg) < MIN_CLASS:
    return Auc(math.nan, math.nan, math.nan, n_pos, n_neg)
  pairs = _pair_matrix(s[y], s[~y])
  point = float(pairs.mean())
  # A resample is a count per item (its cluster's); its AUC is the count-weighted mean of the
  # pair matrix.
  counts = cluster_counts(of_items).astype(np.float64)
  w_pos, w_neg = counts[:, y], counts[:, ~y]
  total = w_pos.sum(1) * w_neg.sum(1)
  usable = total > 0
  draws = np.einsum("bi,ij,bj->b", w_pos[usable], pairs, w_neg[usable]) / total[usable]
  low, high = percentile_interval(draws)
  p = min(1.0, 2 * min(float(np.mean(draws <= 0.5)), float(np.mean(draws >= 0.5))))
  return Auc(point, low, high, n_pos, n_neg, p)


def auc_text(a: Auc, positive: str = "positives", negative: str = "negatives") -> str:
  """'0.712 [0.540, 0.861]', or 'not testable: 2 negatives' (naming the short class)."""
  if not math.isfinite(a.auc):
    short = [f"{n} {name}" for n, name in ((a.positives, positive), (a.negatives, negative))
             if n < MIN_CLASS]
    return "not testable: " + ", ".join(short)
  return f"{a.auc:.3f} [{a.low:.3f}, {a.high:.3f}]"
