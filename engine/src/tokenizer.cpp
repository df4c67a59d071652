// TODO(tokenizer): being written
