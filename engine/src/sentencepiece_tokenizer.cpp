// TODO(sentencepiece_tokenizer): being written
