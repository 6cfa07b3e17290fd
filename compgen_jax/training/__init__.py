"""The one training loop: init_run, train_chunk, train_and_evaluate."""
