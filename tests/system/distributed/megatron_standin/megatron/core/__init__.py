"""Stand-in of megatron.core: only parallel_state and pipeline_parallel.p2p_communication."""
