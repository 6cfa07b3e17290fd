"""Training Gemma-2 language models through the training engine: the training initialisation
(model.py), packed token rows with a loss mask (data.py), the engine family (family.py) and one
program of configs/lm_train.py: train, resume, export as a Hugging Face directory
(experiment.py)."""
