"""Stand-in of megatron.core.parallel_state for hangdx's tests: the process groups of a 3D
(tensor x data x pipeline) parallel job, kept in module globals that carry Megatron's names.

Written in our own words; what matches Megatron-LM (checked against NVIDIA/Megatron-LM's
megatron/core/parallel_state.py, the 2023 module-level version and the current one) is:

- the rank layout: tensor-parallel innermost, then data-parallel, then pipeline
  (Megatron's default order "tp-cp-ep-dp-pp" with cp = ep = 1), so that
      rank = pp_rank * (tp * dp) + dp_rank * tp + tp_rank;
- the order in which initialize_model_parallel() makes the groups, which every rank follows
  (torch.distributed.new_group is collective over the world, members or not):
      1. data-parallel groups, each one followed by its gloo twin (_DATA_PARALLEL_GROUP_GLOO);
         pipeline stage outer, tensor rank inner
      (Megatron then makes the context-parallel groups; this stand-in has no context
       parallelism and makes none)
      2. model-parallel groups (tensor x pipeline: the ranks with one data-parallel index)
      3. tensor-model-parallel groups (blocks of tp consecutive ranks)
      4. pipeline groups, each one followed by its embedding group (first and last stage)
         and its position-embedding group (first stage)
  (Megatron goes on with tensor+data, tensor+context and expert groups; not made here);
- the module globals set on the way, for the groups of this rank:
      _DATA_PARALLEL_GROUP, _DATA_PARALLEL_GROUP_GLOO, _DATA_PARALLEL_GLOBAL_RANKS,
      _MODEL_PARALLEL_GROUP, _MODEL_PARALLEL_GLOBAL_RANKS,
      _TENSOR_MODEL_PARALLEL_GROUP, _TENSOR_MODEL_PARALLEL_GLOBAL_RANKS,
      _PIPELINE_MODEL_PARALLEL_GROUP, _PIPELINE_GLOBAL_RANKS,
      _EMBEDDING_GROUP, _EMBEDDING_GLOBAL_RANKS,
      _POSITION_EMBEDDING_GROUP, _POSITION_EMBEDDING_GLOBAL_RANKS
  (each *_GLOBAL_RANKS a list of global ranks, as in current Megatron; the 2023 version kept
  range objects in some of them);
- the getters' names and meaning (get_tensor_model_parallel_group(),
  get_pipeline_model_parallel_next_rank(), ...).

Group descriptions (torch >= 2.4's group_desc, Megatron's "TENSOR_MODEL_PARALLEL_GROUP" and
so on) are passed only where new_group takes them, as Megatron's create_group does; Debian's
torch 1.13 does not, so there a group is known only by its ranks and its name ("0", "1", ...
in the order of creation, the same on every rank).
"""

import inspect
from datetime import timedelta

import torch
import torch.distributed

# The groups of this rank (None until initialize_model_parallel).
_TENSOR_MODEL_PARALLEL_GROUP = None
_PIPELINE_MODEL_PARALLEL_GROUP = None
_MODEL_PARALLEL_GROUP = None
_EMBEDDING_GROUP = None
_POSITION_EMBEDDING_GROUP = None
_DATA_PARALLEL_GROUP = None
_DATA_PARALLEL_GROUP_GLOO = None

# Their members, as global ranks in group-rank order.
_TENSOR_MODEL_PARALLEL_GLOBAL_RANKS = None
_PIPELINE_GLOBAL_RANKS = None
_MODEL_PARALLEL_GLOBAL_RANKS = None
_EMBEDDING_GLOBAL_RANKS = None
_POSITION_EMBEDDING_GLOBAL_RANKS = None
_DATA_PARALLEL_GLOBAL_RANKS = None

# Overrides of the sizes and ranks (Megatron's set_*_world_size / set_*_rank); None: ask the group.
_MPU_TENSOR_MODEL_PARALLEL_WORLD_SIZE = None
_MPU_PIPELINE_MODEL_PARALLEL_WORLD_SIZE = None
_MPU_DATA_PARALLEL_WORLD_SIZE = None
_MPU_TENSOR_MODEL_PARALLEL_RANK = None
_MPU_PIPELINE_MODEL_PARALLEL_RANK = None
_MPU_DATA_PARALLEL_RANK = None

_VIRTUAL_PIPELINE_MODEL_PARALLEL_RANK = None
_VIRTUAL_PIPELINE_MODEL_PARALLEL_WORLD_SIZE = None


def _new_group_takes_desc():
    try:
        return "group_desc" in inspect.signature(torch.distributed.new_group).parameters
    except (TypeError, ValueError):
        return False


def create_group(ranks, timeout=None, backend=None, group_desc=None):
    """torch.distributed.new_group(ranks), with a description where torch takes one."""
    kwargs = {"ranks": ranks, "backend": backend}
    if timeout is not None:
        kwargs["timeout"] = timeout
    if group_desc is not None and _new_group_takes_desc():
        kwargs["group_desc"] = group_desc
    return torch.distributed.new_group(**kwargs)


def layout(world_size, tensor_model_parallel_size, pipeline_model_parallel_size):
    """The groups of a job, as lists of global ranks, in the order initialize_model_parallel
    makes them: {"dp": [...], "mp": [...], "tp": [...], "pp": [...]}. No torch needed."""
    tp, pp = tensor_model_parallel_size, pipeline_model_parallel_size
    if world_size % (tp * pp):
        raise RuntimeError(f"world size {world_size} is not a multiple of tensor ({tp}) x pipeline ({pp})")
    dp = world_size // (tp * pp)
    per_stage = tp * dp  # ranks in one pipeline stage

    def rank_of(pp_rank, dp_rank, tp_rank):
        return pp_rank * per_stage + dp_rank * tp + tp_rank

    return {
        "dp": [[rank_of(s, d, t) for d in range(dp)] for s in range(pp) for t in range(tp)],
        "mp": [sorted(rank_of(s, d, t) for s in range(pp) for t in range(tp)) for d in range(dp)],
        "tp": [[rank_of(s, d, t) for t in range(tp)] for s in range(pp) for d in range(dp)],
        "pp": [[rank_of(s, d, t) for s in range(pp)] for d in range(dp) for t in range(tp)],
    }


def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                              distributed_timeout_minutes=30, create_gloo_process_groups=True):
    """Make every group of the job (collectively: every rank calls this, in the same order)
    and keep this rank's in the module globals."""
    global _DATA_PARALLEL_GROUP, _DATA_PARALLEL_GROUP_GLOO, _DATA_PARALLEL_GLOBAL_RANKS
    global _MODEL_PARALLEL_GROUP, _MODEL_PARALLEL_GLOBAL_RANKS
    global _TENSOR_MODEL_PARALLEL_GROUP, _TENSOR_MODEL_PARALLEL_GLOBAL_RANKS
    global _PIPELINE_MODEL_PARALLEL_GROUP, _PIPELINE_GLOBAL_RANKS
    global _EMBEDDING_GROUP, _EMBEDDING_GLOBAL_RANKS
    global _POSITION_EMBEDDING_GROUP, _POSITION_EMBEDDING_GLOBAL_RANKS
    assert torch.distributed.is_initialized(), "initialize torch.distributed first"
    assert _TENSOR_MODEL_PARALLEL_GROUP is None, "model parallel groups are already made"
    world_size = torch.distributed.get_world_size()
    rank = torch.distributed.get_rank()
    timeout = timedelta(minutes=distributed_timeout_minutes)
    groups = layout(world_size, tensor_model_parallel_size, pipeline_model_parallel_size)

    for ranks in groups["dp"]:
        group = create_group(ranks, timeout=timeout, group_desc="DATA_PARALLEL_GROUP")
        group_gloo = None
        if create_gloo_process_groups:
            group_gloo = create_group(ranks, timeout=timeout, backend="gloo",
                                      group_desc="DATA_PARALLEL_GROUP_GLOO")
        if rank in ranks:
            _DATA_PARALLEL_GROUP, _DATA_PARALLEL_GROUP_GLOO = group, group_gloo
            _DATA_PARALLEL_GLOBAL_RANKS = ranks

    for ranks in groups["mp"]:
        group = create_group(ranks, timeout=timeout, group_desc="MODEL_PARALLEL_GROUP")
        if rank in ranks:
            _MODEL_PARALLEL_GROUP, _MODEL_PARALLEL_GLOBAL_RANKS = group, ranks

    for ranks in groups["tp"]:
        group = create_group(ranks, timeout=timeout, group_desc="TENSOR_MODEL_PARALLEL_GROUP")
        if rank in ranks:
            _TENSOR_MODEL_PARALLEL_GROUP, _TENSOR_MODEL_PARALLEL_GLOBAL_RANKS = group, ranks

    for ranks in groups["pp"]:
        group = create_group(ranks, timeout=timeout, group_desc="PIPELINE_MODEL_PARALLEL_GROUP")
        if rank in ranks:
            _PIPELINE_MODEL_PARALLEL_GROUP, _PIPELINE_GLOBAL_RANKS = group, ranks
        # The first and the last stage share the word embeddings; the first alone has the
        # position embeddings. With one stage both are that stage.
        embedding_ranks = [ranks[0], ranks[-1]] if len(ranks) > 1 else list(ranks)
        position_embedding_ranks = [ranks[0]]
        group = create_group(embedding_ranks, timeout=timeout, group_desc="EMBEDDING_GROUP")
        if rank in embedding_ranks:
            _EMBEDDING_GROUP = group
        if rank in ranks:
            _EMBEDDING_GLOBAL_RANKS = embedding_ranks
        group = create_group(position_embedding_ranks, timeout=timeout, group_desc="POSITION_EMBEDDING_GROUP")
        if rank in position_embedding_ranks:
            _POSITION_EMBEDDING_GROUP = group
        if rank in ranks:
            _POSITION_EMBEDDING_GLOBAL_RANKS = position_embedding_ranks


def model_parallel_is_initialized():
    return None not in (_TENSOR_MODEL_PARALLEL_GROUP, _PIPELINE_MODEL_PARALLEL_GROUP, _DATA_PARALLEL_GROUP)


def destroy_model_parallel():
    """Forget every group (the process groups themselves stay with torch.distributed)."""
    g = globals()
    for name in list(g):
        if name.startswith("_") and name.isupper() and name.endswith(("_GROUP", "_GROUP_GLOO", "_RANKS")):
            g[name] = None


# ----------------------------------------------------------------- getters

def _need(value, what):
    assert value is not None, f"{what} is not initialized"
    return value


def get_model_parallel_group():
    return _need(_MODEL_PARALLEL_GROUP, "model parallel group")


def get_tensor_model_parallel_group(check_initialized=True):
    if check_initialized:
        _need(_TENSOR_MODEL_PARALLEL_GROUP, "tensor model parallel group")
    return _TENSOR_MODEL_PARALLEL_GROUP


def get_pipeline_model_parallel_group():
    return _need(_PIPELINE_MODEL_PARALLEL_GROUP, "pipeline model parallel group")


def get_data_parallel_group(with_context_parallel=False):
    return _need(_DATA_PARALLEL_GROUP, "data parallel group")


def get_data_parallel_group_gloo(with_context_parallel=False):
    return _need(_DATA_PARALLEL_GROUP_GLOO, "data parallel gloo group")


def get_embedding_group():
    return _need(_EMBEDDING_GROUP, "embedding group")


def get_position_embedding_group():
    return _need(_POSITION_EMBEDDING_GROUP, "position embedding group")


def get_tensor_model_parallel_world_size():
    if _MPU_TENSOR_MODEL_PARALLEL_WORLD_SIZE is not None:
        return _MPU_TENSOR_MODEL_PARALLEL_WORLD_SIZE
    return torch.distributed.get_world_size(group=get_tensor_model_parallel_group())


def get_tensor_model_parallel_rank():
    if _MPU_TENSOR_MODEL_PARALLEL_RANK is not None:
        return _MPU_TENSOR_MODEL_PARALLEL_RANK
    return torch.distributed.get_rank(group=get_tensor_model_parallel_group())


def get_pipeline_model_parallel_world_size():
    if _MPU_PIPELINE_MODEL_PARALLEL_WORLD_SIZE is not None:
        return _MPU_PIPELINE_MODEL_PARALLEL_WORLD_SIZE
    return torch.distributed.get_world_size(group=get_pipeline_model_parallel_group())


def get_pipeline_model_parallel_rank():
    if _MPU_PIPELINE_MODEL_PARALLEL_RANK is not None:
        return _MPU_PIPELINE_MODEL_PARALLEL_RANK
    return torch.distributed.get_rank(group=get_pipeline_model_parallel_group())


def get_data_parallel_world_size(with_context_parallel=False):
    if _MPU_DATA_PARALLEL_WORLD_SIZE is not None:
        return _MPU_DATA_PARALLEL_WORLD_SIZE
    return torch.distributed.get_world_size(group=get_data_parallel_group())


def get_data_parallel_rank(with_context_parallel=False):
    if _MPU_DATA_PARALLEL_RANK is not None:
        return _MPU_DATA_PARALLEL_RANK
    return torch.distributed.get_rank(group=get_data_parallel_group())


def is_pipeline_first_stage(ignore_virtual=True):
    return get_pipeline_model_parallel_rank() == 0


def is_pipeline_last_stage(ignore_virtual=True):
    return get_pipeline_model_parallel_rank() == get_pipeline_model_parallel_world_size() - 1


def get_tensor_model_parallel_src_rank():
    """The global rank of tensor-parallel rank 0 of this rank's group (its broadcasts' source)."""
    return _need(_TENSOR_MODEL_PARALLEL_GLOBAL_RANKS, "tensor model parallel group")[0]


def get_data_parallel_src_rank(with_context_parallel=False):
    return _need(_DATA_PARALLEL_GLOBAL_RANKS, "data parallel group")[0]


def get_pipeline_model_parallel_first_rank():
    return _need(_PIPELINE_GLOBAL_RANKS, "pipeline parallel group")[0]


def get_pipeline_model_parallel_last_rank():
    return _need(_PIPELINE_GLOBAL_RANKS, "pipeline parallel group")[-1]


def get_pipeline_model_parallel_next_rank():
    """The global rank of the next stage of this rank's pipeline (wrapping around)."""
    ranks = _need(_PIPELINE_GLOBAL_RANKS, "pipeline parallel group")
    return ranks[(get_pipeline_model_parallel_rank() + 1) % len(ranks)]


def get_pipeline_model_parallel_prev_rank():
    """The global rank of the previous stage of this rank's pipeline (wrapping around)."""
    ranks = _need(_PIPELINE_GLOBAL_RANKS, "pipeline parallel group")
    return ranks[(get_pipeline_model_parallel_rank() - 1) % len(ranks)]
