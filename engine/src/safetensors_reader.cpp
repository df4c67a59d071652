// TODO(safetensors_reader): being written
