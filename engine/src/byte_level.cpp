// TODO(byte_level): being written
