"""Training Gemma-2 language models through the training engine (an application: apps.py): the
training initialisation (model.py), packed token rows with a loss mask (data.py), llm_data's
corpora and skills as token documents (llm_corpus.py), the engine family (family.py), one
program of configs/lm_train.py: train, resume, export as a Hugging Face directory
(experiment.py), its report.md (report.py), and an export's in-context copying on held-out
repeat documents (copying.py)."""
