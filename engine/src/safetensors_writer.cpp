// TODO(safetensors_writer): being written
