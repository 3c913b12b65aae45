"""Objects for the Python object reader's tests (test_pyobjects.c).

    python pyobjects.py READYFILE

Runs under CPython 3.8 and later, without torch: it puts into sys.modules a
module named "torch.distributed.distributed_c10d" shaped as torch 1.13 keeps
its process groups (plain objects stand for the ProcessGroups), and a
"megatron.core.parallel_state" with two role globals. Then it writes "NAME
ADDRESS" lines to READYFILE (what the test needs), "stage 0" last, and
sleeps in park(group) with g2 as its argument.

Each SIGUSR1 moves on one stage and writes "stage N" to READYFILE.stage:
  1: torch 2.x's shape, the default group only in _world._default_pg;
  2: neither, so the default group must be guessed (the largest group that
     maps every rank to itself).
"""
import ctypes
import mmap
import os
import signal
import sys
import time
import types


class PG:
    """Stands for a torch ProcessGroup."""


g1, g2, g3, g4 = PG(), PG(), PG(), PG()

c10d = types.ModuleType("torch.distributed.distributed_c10d")


class GroupMember:
    WORLD = g1
    NON_GROUP_MEMBER = object()


c10d.GroupMember = GroupMember
c10d._pg_group_ranks = {
    g1: {0: 0, 1: 1, 2: 2, 3: 3},
    g2: {2: 0, 3: 1},
    g3: {3: 0, 1: 1},
    g4: {1: 0, 2: 1},
    # torch 1.13 files a group this rank is not in under NON_GROUP_MEMBER
    GroupMember.NON_GROUP_MEMBER: {0: 0, 1: 1},
}
c10d._pg_names = {g1: "0", g2: "tp-group", g3: "2", g4: "caf\xe9"}
sys.modules[c10d.__name__] = c10d

ps = types.ModuleType("megatron.core.parallel_state")
ps._TENSOR_MODEL_PARALLEL_GROUP = g2
ps._PIPELINE_MODEL_PARALLEL_GROUP = g3
ps._CONTEXT_PARALLEL_GROUP = g3  # pp comes first: g3 stays "pp"
ps._DATA_PARALLEL_GROUP = g1  # the default group takes no role
ps._EXPERT_MODEL_PARALLEL_GROUP = [None, g4]  # newer releases keep lists
ps._EMBEDDING_GROUP = None
sys.modules[ps.__name__] = ps


class _World:
    def __init__(self):
        self._default_pg = None


class Base:
    base_attr = "from the base"


class Plain(Base):
    cls_attr = 7

    def __init__(self):
        self.a = 1
        self.b = "two"
        self.c = 3.5

    def method(self):
        return self.a


split1 = Plain()  # split table (<=3.10), values (3.11/3.12), inline values (3.13)
split2 = Plain()
materialized = Plain()
materialized.__dict__["late"] = 9  # the dict is made and then grown
grown = Plain()
for i in range(40):  # past the shared keys: a combined dict (3.13: inline values invalid)
    grown.__dict__["x%d" % i] = i
other_order = Plain()
other_order.z = None  # a key the shared keys lack
other_order.a = -5

big = {"k%d" % i: i for i in range(50000)}  # 4-byte indices
mid = {"k%d" % i: i for i in range(1500)}  # 2-byte indices
seq = [10, "x", None]
tup = (True, 2.0)

# An area mapped and then unmapped: a pointer into freed memory.
area = mmap.mmap(-1, 1 << 20)
freed = ctypes.addressof(ctypes.c_char.from_buffer(area))
area.close()
# Bytes that are not an object.
junk = bytes(range(256)) * 16


def stage(signum, frame):
    global step
    step += 1
    if step == 1:
        del GroupMember.WORLD
        c10d._world = _World()
        c10d._world._default_pg = g4
    elif step == 2:
        del c10d._world
    with open(sys.argv[1] + ".stage.tmp", "w") as f:
        f.write("stage %d\n" % step)
    os.rename(sys.argv[1] + ".stage.tmp", sys.argv[1] + ".stage")


step = 0
signal.signal(signal.SIGUSR1, stage)


def park(group):
    out = sys.argv[1]
    with open(out + ".tmp", "w") as f:
        for name in ("g1", "g2", "g3", "g4", "split1", "materialized", "grown", "other_order", "big",
                     "mid", "seq", "tup", "junk"):
            f.write("%s %d\n" % (name, id(globals()[name])))
        f.write("method %d\n" % id(Plain.method))
        f.write("freed %d\n" % freed)
        f.write("junk_data %d\n" % (id(junk) + sys.getsizeof(b"") - 1))
        f.write("stage 0\n")
    os.rename(out + ".tmp", out)
    while True:
        time.sleep(3600)


park(g2)
