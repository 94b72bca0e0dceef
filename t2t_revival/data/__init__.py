"""Problems' building blocks: vocabulary, corpus readers, TFRecord writing, input pipeline.

- `problem.Problem`: the base every registered problem derives from (contract
  in its docstring); `text2text_problem.Text2TextProblem` for sentence pairs.
- `scored_predictions.ScoredPredictions`: a problem's metric over predictions.
- `subword_vocabulary.SubwordVocabulary`: shared SentencePiece BPE (PAD=0,
  EOS=1, UNK=2), same ids in Python and in-graph (tensorflow_text).
- `t2t_subword_vocabulary.T2TSubwordVocabulary`: a tensor2tensor SubwordTextEncoder
  file (`*.subwords`), encoded as T2T does; in-graph `t2t_subword_tokenizer`.
- `vocabulary_file.load_vocabulary`: which of the two reads a file.
- `text_pair_reader.TextPairReader`: aligned plain/.gz/.sgm files -> pairs.
- `remote_file.RemoteFile`: corpus URLs, download or a clear missing-file error.
- `sharded_record_writer.ShardedRecordWriter`: deterministic resumable shards.
- `input_pipeline`: parse, length filter, token-bucketed fixed-shape batches.
"""
