// TODO(model_tensors): being written
