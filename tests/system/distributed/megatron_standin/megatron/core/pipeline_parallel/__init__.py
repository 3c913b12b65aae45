"""Stand-in of megatron.core.pipeline_parallel: only p2p_communication."""
