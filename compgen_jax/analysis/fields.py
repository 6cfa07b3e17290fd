"""Which of the rows' fields a table, a figure or a label shows: every one the rows carry, the
known ones first in a preferred order (a hint, never a filter), the rest sorted; a caller leaves
out only fields it names, each with its reason, so a field an application adds shows unasked."""


def present(rows: list[dict], keep=None) -> list[str]:
  """The keys of `rows` in the order they are first seen (those `keep(key)` accepts)."""
  return [k for k in dict.fromkeys(k for r in rows for k in r) if keep is None or keep(k)]


def ordered(keys, first=(), left_out=()) -> list[str]:
  """`first`'s keys that are among `keys`, in its order, then every other one of `keys`, sorted;
  none of `left_out`."""
  keys = set(keys) - set(left_out)
  return [k for k in first if k in keys] + sorted(keys - set(first))
