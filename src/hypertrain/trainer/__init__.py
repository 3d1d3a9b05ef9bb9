"""The deterministic trainer: a training segment is a pure function of public inputs.

Public API (one concept per module):

* ``presets``: ``PRESETS`` ("50m", "proxy", "proxy-moe", "tiny", "tiny-moe"),
  ``get_preset``, ``proxy(vocab_size)``, ``with_vocab``, ``param_count``, ``flops_per_token``.
* ``determinism``: ``configure_determinism(num_threads, device, dtype) -> DeterminismRecord``
  (the one place every switch is set), ``check_determinism(local, manifest_record)``.
* ``model``: ``init_params(spec, seed)``, ``forward``, ``loss_fn``, ``param_shapes`` (the
  canonical parameter order); ``moe``: the mixture-of-experts feed-forward.
* ``optim``: ``lr_multiplier``, ``optimizer_step`` (AdamW, Muon with Newton–Schulz).
* ``state``: ``TrainState``, ``StateConfig``, ``init_state``, ``state_hash``, ``stream_chunks``.
* ``checkpoint``: ``encode_checkpoint`` / ``decode_checkpoint`` (validated, typed errors).
* ``step``: ``train_step`` (the one step; ``StepHooks`` say how an island runs it),
  ``rank_gradient``, ``reduce_gradients`` (emulated layout).
* ``segment``: ``TrainConfig.from_manifest``, ``run_segment``, ``round_loop`` (the one
  round loop; ``Stepper``, ``LocalStepper``, ``StepRunner``), ``run_round -> RoundResult``.
* ``round_config``: ``island_train_config(manifest, round_index)``, the one builder of a
  round's config (miner, ranks, auditor, disputes and the parity harness call it).
* ``distributed``: ``Island`` (a real multi-process island over torch.distributed, data
  parallel with a fixed-order reduction, optional ZeRO-1), ``run_island_round``;
  ``reduction``: ``fold`` (the one fixed-order reduction), ``ScatterFold`` (the
  fixed-order reduce-scatter), ``even_bounds``, ``shard_owners``.
* ``profile``: ``apply_profile(record)`` (the CPU switches of the run, set before torch
  loads, re-executing if needed), ``PROFILES`` ("native", "portable").
* ``codec``: ``encode_int8``, ``decode_int8``, ``iter_decode`` (streaming), ``update_hash``,
  ``relative_l2``; ``sparse_codec``: ``encode_sparse``, ``decode_sparse`` (chunked top-k,
  low-bit values); ``update_header``: the header both codecs share, parsed once;
  ``update``: ``pseudo_gradient``, ``build_update`` and ``encode_update`` /
  ``iter_decode_update`` (the run's codec), ``next_round_state``.
* ``blob``: ``encode_model_blob`` / ``decode_model_blob`` (safetensors, SHA-256 addressed).
* ``export``: ``export_llama`` (transformers ``LlamaForCausalLM`` directory).
* ``tracing``: ``Tracer`` (per-layer and per-op output hashes; off unless passed in).

docs/trainer.md explains the design; docs/protocol-trainer.md the byte layouts.
"""
