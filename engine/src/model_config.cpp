// TODO(model_config): being written
