"""Content atoms assigned to splits, so that no validation or test problem shares its content
with a training problem of any template, nor validation with test, by construction.

An atom is what a problem's text is built from besides its template: an arith question's
numbers, sorted (a multiset: "numbers"; a cross problem's doctest example too), a story's person
name ("person"), a function's argument name ("argument"), a code constant ("constant": an int,
a letter, a separator) and a strings question's quoted word ("word"). Each atom belongs to one
bucket, train, validation or test, by a stable hash of (kind, atom) against the config's
`held_out_content` fractions, and a split draws only atoms of its own bucket (seen: train's).
The same atom is in the same bucket in every template and skill, so e.g. the numbers 3 and 4
of a test story are in no training story of any wording, in either order. Entry-point names
and a story's items belong to their template alone (templates are split by name: config.py),
so they need no bucket.
"""

import functools
import hashlib
import random
from collections.abc import Sequence
from typing import NamedTuple

BUCKETS = ("train", "validation", "test")
OF_SPLIT = {"train": "train", "seen": "train", "validation": "validation", "test": "test"}
KINDS = ("numbers", "person", "argument", "constant", "word")


class EmptyBucket(ValueError):
  """A pool with no atom of the bucket a split draws from."""


@functools.lru_cache(maxsize=1 << 16)
def unit(kind: str, atom) -> float:
  """A stable number in [0, 1) for (kind, atom): the first 8 bytes of its sha256."""
  digest = hashlib.sha256(f"{kind}\0{atom!r}".encode()).digest()
  return int.from_bytes(digest[:8], "big") / 2 ** 64


def bucket_of(kind: str, atom, validation: float, test: float) -> str:
  """The bucket of an atom: test below `test`, validation below `test + validation`, else
  train."""
  u = unit(kind, atom)
  return "test" if u < test else "validation" if u < test + validation else "train"


class Bucket(NamedTuple):
  """What a generator may draw for one split: the atoms of bucket `name` (None: any atom, for
  callers outside a split)."""
  name: str | None = None
  validation: float = 0.0
  test: float = 0.0

  def holds(self, kind: str, atom) -> bool:
    return self.name is None or bucket_of(kind, atom, self.validation, self.test) == self.name

  def pool(self, kind: str, atoms: Sequence) -> list:
    """The atoms of `atoms` in this bucket, in their order; EmptyBucket when none is."""
    out = [a for a in atoms if self.holds(kind, a)]
    if not out:
      raise EmptyBucket(f"none of the {len(atoms)} {kind} atoms ({', '.join(map(repr, atoms[:4]))}"
                        f"{', ...' if len(atoms) > 4 else ''}) is in the {self.name} bucket")
    return out

  def choice(self, rand: random.Random, kind: str, atoms: Sequence):
    return rand.choice(self.pool(kind, atoms))


ANY = Bucket()


def for_split(cfg, split: str) -> Bucket:
  """The bucket a split of `cfg` (llm_data's config) draws from."""
  return Bucket(OF_SPLIT[split], cfg.held_out_content.validation, cfg.held_out_content.test)
