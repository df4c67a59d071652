# filled by the tokenizer work
