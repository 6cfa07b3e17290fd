"""The training loop: init_run, make_train_chunk, train_and_evaluate."""
