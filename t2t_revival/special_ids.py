"""The special token ids every vocabulary, model, loss and search agrees on.

The SentencePiece vocabulary is trained with these ids (`SubwordVocabulary`);
the model reads PAD as padding and the decoder's start symbol, the loss skips
PAD targets, datagen appends EOS to both sides and the searches stop at EOS.
There is no BOS.
"""

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
