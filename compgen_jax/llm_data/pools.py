"""Made-up words that enlarge the content pools (person names, words, argument names) to
thousands: with a few dozen of each, a small expert that never copies from its prompt passes
its training problems by writing the pool's common names, and fails every held-out problem,
whose content is another bucket's (buckets.py); with thousands, only copying from the prompt
passes. Pronounceable consonant-vowel syllables in a fixed order (the same pool everywhere)."""

import builtins
import itertools
import keyword
import random

from compgen_jax import rng

CONSONANTS, VOWELS = "bdfgklmnprstvz", "aeiou"


def made_up(count: int, syllables: tuple[int, ...], seed: str, avoid=frozenset()
            ) -> tuple[str, ...]:
  """`count` distinct lowercase made-up words of the given syllable counts, none in `avoid`,
  a Python keyword or a builtin's name, in the fixed order of `seed` (one per pool)."""
  units = ["".join(p) for p in itertools.product(CONSONANTS, VOWELS)]
  rand = random.Random(rng.stream_id(f"llm_data/pool/{seed}"))
  out, seen = [], set(avoid) | set(keyword.kwlist) | set(dir(builtins))
  while len(out) < count:
    word = "".join(rand.choice(units) for _ in range(rand.choice(syllables)))
    if word not in seen:
      seen.add(word)
      out.append(word)
  return tuple(out)


def extend(pool: tuple[str, ...], size: int, syllables: tuple[int, ...], seed: str,
           capitalize: bool = False, avoid=frozenset()) -> tuple[str, ...]:
  """`pool` followed by made-up words (capitalized if asked) up to `size` entries in all."""
  more = made_up(size - len(pool), syllables, seed, set(avoid) | {w.lower() for w in pool})
  return pool + tuple(w.capitalize() if capitalize else w for w in more)
