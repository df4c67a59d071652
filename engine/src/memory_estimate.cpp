// TODO(memory_estimate): being written
