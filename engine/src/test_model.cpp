// TODO(test_model): being written
