"""A rank that JIT-builds a tiny extension with torch.utils.cpp_extension.load, as
Megatron-LM and DeepSpeed do at startup. Writes its pid first (it may run under
`hangdx run`, so its pid is not the one its starter knows), then 'loading' and
'loaded' markers to stdout.

usage: loader.py --build-dir DIR --name EXT --source FILE --pidfile FILE
"""
import argparse
import os
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--build-dir", required=True)
ap.add_argument("--name", required=True)
ap.add_argument("--source", required=True)
ap.add_argument("--pidfile", required=True)
a = ap.parse_args()

tmp = a.pidfile + ".tmp"
with open(tmp, "w") as f:
    f.write(f"{os.getpid()}\n")
os.rename(tmp, a.pidfile)

from torch.utils import cpp_extension  # noqa: E402  (after the pid: the import takes a second)

print(f"rank {os.environ.get('RANK')}: loading {a.name} in {a.build_dir}", flush=True)
mod = cpp_extension.load(name=a.name, sources=[a.source], build_directory=a.build_dir, verbose=True)
print(f"rank {os.environ.get('RANK')}: loaded {mod.__name__}", flush=True)
