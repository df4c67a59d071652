// TODO(mapped_file): being written
