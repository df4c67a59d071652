// TODO(bpe_tokenizer): being written
