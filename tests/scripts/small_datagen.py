"""Run by tests/test_parallel_datagen.py in a subprocess (so it can be killed):
`small_datagen.py DATA_DIR TMP_DIR NUM_WORKERS` runs the datagen of a small
Multi30k-layout problem (vocabulary of 1000 pieces, 8 train shards)."""

import sys

from t2t_revival.problems.translate_multi30k import TranslateEndeMulti30k


class SmallDatagen(TranslateEndeMulti30k):
    vocab_size = 1000
    num_shards = {"train": 8, "dev": 2}
    registered_name = "small_datagen"


if __name__ == "__main__":
    SmallDatagen(download=False, num_workers=int(sys.argv[3])).generate_data(
        sys.argv[1], sys.argv[2])
