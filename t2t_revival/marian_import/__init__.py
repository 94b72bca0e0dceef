"""Importing Marian models (OPUS-MT) in Hugging Face's format: a folder as
transformers' save_pretrained writes it becomes one of our training
directories (`t2t-import --marian_dir`)."""
