// TODO(streaming_decoder): being written
