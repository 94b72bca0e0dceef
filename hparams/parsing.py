"""English constituency parsing sets (the paper's section 6.3)."""

from t2t_revival.settings.hparams import HParams
from t2t_revival.hparams_sets.transformer import transformer_base, transformer_big
from t2t_revival.registry import register_hparams

# Section 6.3: "a 4-layer transformer with d_model = 1024", beam 21, alpha 0.3,
# maximum output length = input length + 300. Linearized trees are long, so
# max_length is raised to 512.
_PARSING_DECODE = dict(beam_size=21, alpha=0.3, extra_length=300)


@register_hparams
def transformer_parsing_base() -> HParams:
    """Parsing (6.3): N=4, d_model 1024, d_ff 2048, h=8, dropout 0.2; beam 21, alpha 0.3."""
    # d_ff, h and dropout are not given by the paper for parsing; these are
    # tensor2tensor's transformer_parsing_base values (dropout 0.2 on residuals
    # and attention, for the small WSJ-only training set).
    return transformer_base().replace(
        num_hidden_layers=4, d_model=1024, d_ff=2048, num_heads=8,
        dropout=0.2, attention_dropout=0.2, max_length=512, **_PARSING_DECODE)


@register_hparams
def transformer_parsing_big() -> HParams:
    """Parsing (6.3) with big-model widths: N=4, d_model 1024, d_ff 4096, h=16; beam 21."""
    return transformer_big().replace(
        num_hidden_layers=4, dropout=0.1, max_length=512, **_PARSING_DECODE)


@register_hparams
def transformer_parsing_tiny() -> HParams:
    """Parsing on a 2-core CPU: N=2, d_model 128, d_ff 512, h=4; beam 21, alpha 0.3.

    The run of benchmarks/RESULTS.md ("Parsing on the PTB sample"): 2048-token
    batches, 400 warm-up steps, learning rate 2.0; about 1,000 steps on the
    free PTB sample (`parsing_english_ptb_sample`). The paper's parsing
    decoding (beam 21, alpha 0.3, extra length 300) and max_length 512 are kept.
    """
    return transformer_parsing_base().replace(
        num_hidden_layers=2, d_model=128, d_ff=512, num_heads=4,
        batch_size=2048, learning_rate_warmup_steps=400, learning_rate=2.0)
