"""One rank of a 4-rank gloo job for test_pyobjects.c (torch 1.13 or later).

    python3 torch_groups.py RANK PORT READYFILE

Every rank joins the world group on 127.0.0.1:PORT, then creates the groups
[0, 1] and [2, 3], writes "group ADDRESS" (its own pair's address) and
"ready" to READYFILE, and parks in park(group) until killed. Exits 77 when
torch.distributed has no gloo.
"""
import os
import sys
import time

import torch.distributed as dist


def park(group):
    with open(out + ".tmp", "w") as f:
        f.write("group %d\nready\n" % id(group))
    os.rename(out + ".tmp", out)
    while True:
        time.sleep(3600)


rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
if not dist.is_gloo_available():
    sys.exit(77)
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%s" % port, rank=rank, world_size=4)
low = dist.new_group([0, 1])
high = dist.new_group([2, 3])
park(low if rank < 2 else high)
