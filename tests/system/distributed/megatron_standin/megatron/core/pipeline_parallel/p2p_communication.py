"""Stand-in of megatron.core.pipeline_parallel.p2p_communication for hangdx's tests: the
point-to-point exchange between pipeline stages, the way Megatron-LM does it with
batch_p2p_comm on (the module-level version of 2023-2025; today it is P2PCommunicator's
method of the same name and locals).

Written in our own words. What matches Megatron (checked against NVIDIA/Megatron-LM's
megatron/core/pipeline_parallel/p2p_communication.py) and what hangdx may rely on:
- _communicate(*, tensor_send_next, tensor_send_prev, recv_prev, recv_next, tensor_shape,
  config, wait_on_reqs=True) returns (tensor_recv_prev, tensor_recv_next, reqs), and its
  frame's locals carry Megatron's names: tensor_send_next, tensor_send_prev, recv_prev,
  recv_next, tensor_shape, config, wait_on_reqs, recv_prev_shape, recv_next_shape,
  tensor_recv_prev_func, tensor_recv_next_func, p2p_func, pp_group, next_rank, prev_rank,
  reqs, tensor_recv_prev, tensor_recv_next, p2p_reqs; it waits on the requests with
  `for req in reqs: req.wait()` (the rank blocks in _communicate itself: Work.wait has no
  Python frame);
- _batched_p2p_ops(*, tensor_send_prev, tensor_recv_prev, tensor_send_next, tensor_recv_next,
  group, prev_pipeline_rank, next_pipeline_rank) makes one torch.distributed.P2POp per
  tensor (isend/irecv, peers as global ranks, on the pipeline group), in Megatron's order
  (send_prev, recv_prev, send_next, recv_next), and posts them with batch_isend_irecv;
- send_forward / recv_forward / send_backward / recv_backward call _communicate the same way.
CPU tensors here (gloo), where Megatron puts them on the current CUDA device.
"""

from dataclasses import dataclass

import torch
import torch.distributed

from megatron.core import parallel_state


@dataclass
class ModelParallelConfig:
    """The few fields of Megatron's ModelParallelConfig that _communicate reads."""
    pipeline_dtype: torch.dtype = torch.float32
    batch_p2p_comm: bool = True
    variable_seq_lengths: bool = False


DEFAULT_CONFIG = ModelParallelConfig()


def _batched_p2p_ops(*, tensor_send_prev, tensor_recv_prev, tensor_send_next, tensor_recv_next,
                     group, prev_pipeline_rank, next_pipeline_rank):
    ops = []
    if tensor_send_prev is not None:
        ops.append(torch.distributed.P2POp(torch.distributed.isend, tensor_send_prev, prev_pipeline_rank, group))
    if tensor_recv_prev is not None:
        ops.append(torch.distributed.P2POp(torch.distributed.irecv, tensor_recv_prev, prev_pipeline_rank, group))
    if tensor_send_next is not None:
        ops.append(torch.distributed.P2POp(torch.distributed.isend, tensor_send_next, next_pipeline_rank, group))
    if tensor_recv_next is not None:
        ops.append(torch.distributed.P2POp(torch.distributed.irecv, tensor_recv_next, next_pipeline_rank, group))
    reqs = torch.distributed.batch_isend_irecv(ops) if ops else []
    return reqs


def _communicate(*, tensor_send_next, tensor_send_prev, recv_prev, recv_next, tensor_shape,
                 config=None, wait_on_reqs=True):
    """Send to and receive from the neighbouring stages in one batch; with wait_on_reqs,
    block until every transfer is done. Returns (tensor_recv_prev, tensor_recv_next, reqs)."""
    config = config or DEFAULT_CONFIG
    tensor_recv_prev_func = None
    tensor_recv_next_func = None
    recv_prev_shape = tensor_shape
    recv_next_shape = tensor_shape

    def create_tensor_recv_prev():
        return torch.empty(recv_prev_shape, requires_grad=True, dtype=config.pipeline_dtype)

    def create_tensor_recv_next():
        return torch.empty(recv_next_shape, requires_grad=True, dtype=config.pipeline_dtype)

    if recv_prev:
        if tensor_shape is None:
            raise RuntimeError("tensor_shape must be given to receive from the previous stage")
        tensor_recv_prev_func = create_tensor_recv_prev
    if recv_next:
        if tensor_shape is None:
            raise RuntimeError("tensor_shape must be given to receive from the next stage")
        tensor_recv_next_func = create_tensor_recv_next

    assert config.batch_p2p_comm, "this stand-in only batches its p2p ops"
    p2p_func = _batched_p2p_ops
    pp_group = parallel_state.get_pipeline_model_parallel_group()
    next_rank = parallel_state.get_pipeline_model_parallel_next_rank()
    prev_rank = parallel_state.get_pipeline_model_parallel_prev_rank()

    reqs = []
    tensor_recv_prev = tensor_recv_prev_func() if tensor_recv_prev_func is not None else None
    tensor_recv_next = tensor_recv_next_func() if tensor_recv_next_func is not None else None
    p2p_reqs = p2p_func(tensor_send_prev=tensor_send_prev, tensor_recv_prev=tensor_recv_prev,
                        tensor_send_next=tensor_send_next, tensor_recv_next=tensor_recv_next,
                        group=pp_group, prev_pipeline_rank=prev_rank, next_pipeline_rank=next_rank)
    reqs.extend(p2p_reqs)
    if wait_on_reqs and len(reqs) > 0:
        for req in reqs:
            req.wait()
        reqs = None
    return tensor_recv_prev, tensor_recv_next, reqs


def recv_forward(tensor_shape, config=None):
    """The activations of the previous stage (None on the first stage)."""
    if parallel_state.is_pipeline_first_stage():
        return None
    input_tensor, _, _ = _communicate(tensor_send_next=None, tensor_send_prev=None, recv_prev=True,
                                      recv_next=False, tensor_shape=tensor_shape, config=config)
    return input_tensor


def send_forward(output_tensor, config=None):
    """Send this stage's activations to the next stage (nothing on the last stage)."""
    if parallel_state.is_pipeline_last_stage():
        return
    _communicate(tensor_send_next=output_tensor, tensor_send_prev=None, recv_prev=False,
                 recv_next=False, tensor_shape=None, config=config)


def recv_backward(tensor_shape, config=None):
    """The gradients of the next stage (None on the last stage)."""
    if parallel_state.is_pipeline_last_stage():
        return None
    _, output_tensor_grad, _ = _communicate(tensor_send_next=None, tensor_send_prev=None, recv_prev=False,
                                            recv_next=True, tensor_shape=tensor_shape, config=config)
    return output_tensor_grad


def send_backward(input_tensor_grad, config=None):
    """Send this stage's input gradients to the previous stage (nothing on the first stage)."""
    if parallel_state.is_pipeline_first_stage():
        return
    _communicate(tensor_send_next=None, tensor_send_prev=input_tensor_grad, recv_prev=False,
                 recv_next=False, tensor_shape=None, config=config)
