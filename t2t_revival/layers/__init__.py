"""The paper's Transformer building blocks as Keras 3 layers (`keras.ops` only).

One public class per file, file named after the class. Every layer runs on the
TensorFlow and JAX backends and under the mixed_bfloat16 / mixed_float16 dtype
policies (attention softmax in float32).
"""

from t2t_revival.layers.decoder_layer import DecoderLayer
from t2t_revival.layers.dropout import Dropout
from t2t_revival.layers.encoder_layer import EncoderLayer
from t2t_revival.layers.feed_forward_network import FeedForwardNetwork
from t2t_revival.layers.multi_head_attention import MultiHeadAttention
from t2t_revival.layers.position_embedding import PositionEmbedding
from t2t_revival.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from t2t_revival.layers.token_embedding import TokenEmbedding

__all__ = [
    "DecoderLayer", "Dropout", "EncoderLayer", "FeedForwardNetwork", "MultiHeadAttention",
    "PositionEmbedding", "SinusoidalPositionEncoding", "TokenEmbedding",
]
