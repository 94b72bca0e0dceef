"""tensor2tensor's hparam names: which of ours each one is, or why none is.

A tensor2tensor user's `--hparams "hidden_size=1024,filter_size=4096"` and an
hparam set written with T2T's names (`HParams().replace(hidden_size=1024)`)
work here: `HParams.override_from_string` and `HParams.replace` resolve each
name of `T2T_NAMES` once to ours (through `to_ours`), so `hparams.json` holds
our names only. Every other name of T2T's transformer_base is refused naming
it: with its reason (`NO_EQUIVALENT`), or as a feature this Transformer does
not have (`OTHER_T2T_NAMES`).

Two names are T2T's and ours with another meaning, and stay ours:
`learning_rate` (T2T's legacy "noam" schedule multiplies it by 0.002 x 5000
= 10: its 0.1 is our 1.0; under T2T's newer schedule its
`learning_rate_constant` is our `learning_rate`) and `dropout` (T2T's is
unused by its Transformer; ours is its `layer_prepostprocess_dropout`), and
`norm_type` (T2T's is the kind of normalization, "layer"; ours is where it
goes, which T2T says with `layer_preprocess_sequence`).
docs/tensor2tensor.md has the table.
"""

from __future__ import annotations

from typing import Any

from t2t_revival.errors import UserError

T2T_NAMES: dict[str, str] = {
    "hidden_size": "d_model",
    "filter_size": "d_ff",
    "layer_prepostprocess_dropout": "dropout",
    "shared_embedding_and_softmax_weights": "shared_embedding",
    "optimizer_multistep_accumulate_steps": "gradient_accumulation_steps",
    "optimizer_adam_beta1": "adam_beta1",
    "optimizer_adam_beta2": "adam_beta2",
    "optimizer_adam_epsilon": "adam_epsilon",
    "norm_epsilon": "layer_norm_epsilon",
    "pack_dataset": "packing",
    # Our schedule is T2T's "constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size".
    "learning_rate_constant": "learning_rate",
    "layer_preprocess_sequence": "norm_type",
    "layer_postprocess_sequence": "norm_type",
    "pos": "position_encoding",
    "ffn_layer": "ffn_activation",
    "activation_dtype": "mixed_precision",
}
"""{tensor2tensor's hparam name: ours}. Names that T2T and we share with the
same meaning (num_hidden_layers, num_encoder_layers, num_decoder_layers,
num_heads, attention_dropout, relu_dropout, label_smoothing,
learning_rate_warmup_steps, max_length, batch_size, clip_grad_norm) need no
entry."""

T2T_VALUES: dict[str, dict[Any, Any]] = {
    "layer_preprocess_sequence": {"n": "pre", "none": "post", "": "post"},
    "layer_postprocess_sequence": {"da": "pre", "dan": "post"},
    "pos": {"timing": "sinusoid", "emb": "learned"},
    "ffn_layer": {"dense_relu_dense": "relu"},
    "activation_dtype": {"float32": "float32", "bfloat16": "mixed_bfloat16"},
    # T2T's 0 is "no accumulation", our 1; other counts are the same.
    "optimizer_multistep_accumulate_steps": {0: 1},
}
"""{T2T name: {its value: ours}} where the values differ. A text value not in
the map has no equivalent and is refused; a number not in it is the same here."""

NO_EQUIVALENT: dict[str, str] = {
    "learning_rate_schedule": "the schedule here is the paper's, T2T's "
                              "'constant*linear_warmup*rsqrt_decay*rsqrt_hidden_size' "
                              "(learning_rate is its constant); learning_rate_cooldown_steps "
                              "adds a linear_decay tail",
    "learning_rate_decay_scheme": "the schedule here is the paper's (T2T's 'noam'); "
                                  "learning_rate_cooldown_steps adds a linear decay",
    "learning_rate_decay_steps": "use learning_rate_cooldown_steps (the length of the "
                                 "linear_decay tail)",
    "attention_key_channels": "T2T's is the total over heads; set d_k, per head "
                              "(attention_key_channels / num_heads)",
    "attention_value_channels": "T2T's is the total over heads; set d_v, per head "
                                "(attention_value_channels / num_heads)",
    "weight_decay": "there is no weight decay: Adam as in the paper",
    "optimizer": "the optimizer is Adam, as in the paper (adam_beta1, adam_beta2, adam_epsilon)",
    "initializer": "the initializers are fixed (Glorot uniform, embeddings normal d_model^-0.5)",
    "initializer_gain": "the initializers are fixed",
    "symbol_modality_num_shards": "the embedding is one matrix",
    "use_target_space_embedding": "set target_space_embedding (and target_space_id), "
                                  "as t2t-import does",
    "self_attention_type": "attention is dot-product attention",
    "max_relative_position": "positions are absolute (position_encoding)",
    "sampling_method": "sampling is a decoding setting: --decode_hparams sampling=true",
    "sampling_temp": "sampling is a decoding setting: --decode_hparams "
                     "sampling=true,temperature=T",
    "sampling_keep_top_k": "sampling is a decoding setting: --decode_hparams "
                           "sampling=true,top_k=K",
    "min_length": "training pairs are dropped only above max_length",
    "eval_drop_long_sequences": "long dev pairs are always kept",
    "weight_noise": "there is no weight noise",
    "grad_noise_scale": "there is no gradient noise",
    "use_fixed_batch_size": "batch_size is always tokens per replica",
    "length_bucket_step": "bucket_boundaries sets the buckets",
    "min_length_bucket": "bucket_boundaries sets the buckets",
}
"""{T2T hparam name with no equivalent here: why, and what to use}."""

OTHER_T2T_NAMES = frozenset("""
    add_relative_to_values area_key_mode area_value_mode
    attention_dropout_broadcast_dims attention_variables_3d batch_shuffle_size
    bottom causal_decoder_self_attention compress_steps conv_first_kernel
    daisy_chain_variables eval_run_autoregressive factored_logits force_full_predict
    gpu_automatic_mixed_precision gumbel_noise_weight hard_attention_k
    heads_share_relative_embedding kernel_height kernel_width
    layer_prepostprocess_dropout_broadcast_dims learning_rate_cosine_cycle_steps
    learning_rate_decay_rate learning_rate_decay_staircase learning_rate_minimum
    loss max_area_height max_area_width max_input_seq_length max_target_seq_length
    memory_height mixed_precision_optimizer_init_loss_scale
    mixed_precision_optimizer_loss_scaler mlperf_mode moe_hidden_sizes moe_k
    moe_loss_coef moe_num_experts moe_overhead_eval moe_overhead_train
    multiproblem_fixed_train_length multiproblem_label_weight
    multiproblem_max_input_length multiproblem_max_target_length
    multiproblem_mixing_schedule multiproblem_per_task_threshold
    multiproblem_reweight_label_loss multiproblem_schedule_max_examples
    multiproblem_schedule_threshold multiproblem_target_eval_only
    multiproblem_vocab_size name nbr_decoder_problems no_data_parallelism
    num_area_layers num_sampled_classes optimizer_adafactor_beta1
    optimizer_adafactor_beta2 optimizer_adafactor_clipping_threshold
    optimizer_adafactor_decay_type optimizer_adafactor_factored
    optimizer_adafactor_memory_exponent
    optimizer_adafactor_multiply_by_parameter_scale optimizer_momentum_momentum
    optimizer_momentum_nesterov optimizer_zero_grads overload_eval_metric_name
    pad_batch parameter_attention_key_channels parameter_attention_value_channels
    position_features prepend_mode pretrained_model_dir proximity_bias
    relu_dropout_broadcast_dims scheduled_sampling_gold_mixin_prob
    scheduled_sampling_method scheduled_sampling_num_passes scheduled_sampling_prob
    scheduled_sampling_warmup_schedule scheduled_sampling_warmup_steps
    split_targets_chunk_length split_targets_max_chunks
    split_targets_strided_training split_to_length summarize_grads summarize_vars
    symbol_dropout top tpu_enable_host_call unidirectional_encoder use_custom_ops
    use_pad_remover video_num_input_frames video_num_target_frames vocab_divisor
    warm_start_from_second weight_dtype weights_fn
""".split())
"""The other hparams of tensor2tensor's transformer_base: settings of what this
Transformer does not have (other optimizers, mixtures of experts, TPU and
multi-problem training, relative and area attention, scheduled sampling,
summaries); refused, as the names of NO_EQUIVALENT are, naming them."""

T2T_DECODE_NO_EQUIVALENT: dict[str, str] = {
    **{name: "it is for images, video or audio problems" for name in (
        "save_images", "display_decoded_images", "frames_per_second", "border_percent",
        "max_display_outputs", "max_display_decodes", "vgg_ckpt_path")},
    **{name: "it is for MLPerf runs" for name in (
        "mlperf_decode_step", "mlperf_threshold", "mlperf_success")},
    "min_length_ratio": "outputs have no minimum length",
    "eos_penalty": "EOS is scored as every token",
    "block_size": "decoding is one token a step (beam search or sampling)",
    "guess_and_check_top_k": "decoding is beam search or sampling",
    "guess_and_check_epsilon": "decoding is beam search or sampling",
    "insertion_parallel": "decoding is left to right",
    "identity_output": "outputs are translations",
    "decode_to_file": "use the t2t-decoder flag --decode_to_file",
    "decode_reference": "use the t2t-decoder flag --decode_reference",
    "decode_in_memory": "inputs are always held in memory",
    "decode_timeout_mins": "t2t-decoder decodes one checkpoint (--checkpoint_path) and "
                           "does not wait for new ones",
    "summaries_log_dir": "decoding writes no summaries; t2t-bleu --translations_dir "
                         "writes BLEU events",
    "shards_start_offset": "shards are numbered from 0 (shard_id)",
    "shard_google_format": "shard files are named <file>NNN",
    "num_decodes": "each input is decoded once (samples_per_input draws several with "
                   "sampling=true)",
    "force_decode_length": "decoding stops at EOS or extra_length",
    "multiproblem_task_id": "there is no multi-problem training",
    "skip_eos_postprocess": "outputs end at EOS, which is not written",
    "export_extra_infer_outputs": "the SavedModel's outputs are fixed (t2t-exporter)",
}
"""{tensor2tensor's --decode_hparams key with no equivalent here: why}. Its
other keys are ours (beam_size, alpha, extra_length, batch_size,
return_beams, num_samples, max_input_size, write_beam_scores, delimiter,
shards, shard_id, log_results: `DecodeHParams`)."""


def is_t2t_name(name: str) -> bool:
    """Whether `name` is a tensor2tensor hparam name that is not ours."""
    return name in T2T_NAMES or name in NO_EQUIVALENT or name in OTHER_T2T_NAMES


def to_ours(name: str, value: Any, error: type[UserError]) -> tuple[str, Any]:
    """(our name, our value) for tensor2tensor's hparam `name` set to `value`;
    `error` naming it when it has no equivalent here (the name, or this value)."""
    if name in NO_EQUIVALENT or name in OTHER_T2T_NAMES:
        why = NO_EQUIVALENT.get(name, "this Transformer has no such feature (the fields: "
                                      "t2t-trainer --registry_help)")
        raise error(f"tensor2tensor's hparam '{name}' has no equivalent here: {why}. "
                    f"Received: {name}={value}")
    ours = T2T_NAMES[name]
    values = T2T_VALUES.get(name, {})
    if isinstance(value, str) and values and value not in values:
        accepted = ", ".join(repr(v) for v in values)
        raise error(f"tensor2tensor's hparam '{name}' (ours: {ours}) has no equivalent of "
                    f"{value!r} here; it takes {accepted}. Received: {name}={value!r}")
    return ours, values.get(value, value)


def value_type(name: str, our_type: Any) -> Any:
    """The type in which tensor2tensor's `name` is written on a command line:
    text where its values are mapped to ours (`T2T_VALUES`), else ours."""
    values = T2T_VALUES.get(name)
    if values and all(isinstance(v, str) for v in values):
        return str
    return our_type


def names_help() -> str:
    """tensor2tensor's names that `--hparams` takes, with ours, and the shared
    names that mean something else here (`t2t-trainer --registry_help`)."""
    width = max(len(name) for name in T2T_NAMES)
    lines = ["tensor2tensor's hparam names, taken and saved as ours (values mapped where "
             "they differ; its other names are refused, naming them):"]
    for name, ours in T2T_NAMES.items():
        values = T2T_VALUES.get(name)
        mapped = (" (" + ", ".join(f"{k!r}->{v!r}" for k, v in values.items()) + ")"
                  if values else "")
        lines.append(f"  {name.ljust(width)}  {ours}{mapped}")
    lines.append("  Same name, another meaning: learning_rate (T2T's legacy noam value x 10 "
                 "here), dropout (T2T's layer_prepostprocess_dropout), norm_type (T2T: "
                 "layer_preprocess_sequence), shared_embedding (here also the softmax).")
    return "\n".join(lines)
