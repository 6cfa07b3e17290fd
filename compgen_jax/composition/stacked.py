"""Models of one architecture as one vmapped forward over stacked parameters.

A composition's models usually share an architecture (a base and its fine-tuned experts). A
plan groups the models that share one `Model` (the same apply function) and whose params and
caches have the same shapes and dtypes; each group of two or more runs as one `jax.vmap` of
apply over its params and caches stacked on a new leading axis (one batched matmul per layer
instead of one per model), every other model as before. The plan is static: it is made at
trace time from the shapes, so grouping costs nothing at run time, and a model that fits no
group runs alone. A scalar cache leaf (the position counter) is not stacked but shared: every
model of a group has caches of one shape and is fed the same tokens, so its counters agree
and every model writes the same cache slot. Stacking copies the grouped params once per call of the
jitted program that stacks them (memory: one more copy of those params while it runs).
Shapes: M models, G models in a group, B batch, L tokens, V vocabulary.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp

from compgen_jax.lm.model import Model
from compgen_jax.types import Array, PyTree

Groups = tuple[tuple[int, ...], ...]  # model indices per group, each group in model order


def _signature(tree: PyTree) -> tuple:
  leaves, treedef = jax.tree.flatten(tree)
  return treedef, tuple((jnp.shape(x), jnp.result_type(x)) for x in leaves)


def plan(models: Sequence[Model], params: Sequence[PyTree], caches: Sequence[PyTree],
         enabled: bool = True) -> Groups:
  """Groups of models that run as one vmapped apply (all singletons unless `enabled`); a
  model without params (a uniform model) runs alone."""
  groups: dict = {}
  for i, (m, p, c) in enumerate(zip(models, params, caches, strict=True)):
    stackable = enabled and bool(jax.tree.leaves(p))
    key = (m, _signature(p), _signature(c)) if stackable else ("alone", i)
    groups.setdefault(key, []).append(i)
  return tuple(tuple(g) for g in groups.values())


def _axes(tree: PyTree) -> PyTree:
  """The stacked axis of each leaf: 0, or None for a scalar (shared, not stacked)."""
  return jax.tree.map(lambda x: None if jnp.ndim(x) == 0 else 0, tree)


def stack(groups: Groups, trees: Sequence[PyTree], *, caches: bool = False
          ) -> tuple[PyTree, ...]:
  """Per group: its one model's tree, or the group's trees stacked leaf by leaf [G, ...]
  (`caches`: a scalar leaf is the first model's, shared)."""
  def leaf(*xs):
    return xs[0] if caches and jnp.ndim(xs[0]) == 0 else jnp.stack(xs)
  return tuple(trees[g[0]] if len(g) == 1 else
               jax.tree.map(leaf, *(trees[i] for i in g)) for g in groups)


def apply(groups: Groups, models: Sequence[Model], params: tuple, tokens_BxL: Array,
          caches: tuple, valid_BxL: Array) -> tuple[list[Array], tuple]:
  """Every model fed the same tokens: (its logits [B, L, V], in model order; the groups' new
  caches). `params` and `caches` are per group, as `stack` makes them (caches with
  `caches=True`)."""
  logits: list = [None] * len(models)
  new_caches = []
  for g, p, cache in zip(groups, params, caches, strict=True):
    m = models[g[0]]
    if len(g) == 1:
      logits[g[0]], cache = m.apply(p, tokens_BxL, cache, valid_BxL)
    else:
      axes = _axes(cache)
      logits_GxBxLxV, cache = jax.vmap(m.apply, in_axes=(0, None, axes, None),
                                       out_axes=(0, axes))(p, tokens_BxL, cache, valid_BxL)
      for j, i in enumerate(g):
        logits[i] = logits_GxBxLxV[j]
    new_caches.append(cache)
  return logits, tuple(new_caches)
