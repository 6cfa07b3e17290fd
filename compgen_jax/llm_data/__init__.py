"""Offline data for the CPU-sized LLM composition study (issue 38): real prose and Python from
the installed interpreter, generated math / code / string skills with template-held-out test
splits, and their SentencePiece tokenizer (config.py: presets; build.py: the writer)."""
