// TODO(checkpoint): being written
