"""Every process and thread of a hangdx report as an object, and every thread's frames as frame
objects, whatever the report's version (docs/formats.md "Reports"): a hangdx.report/1 and a /2
written with --full hold objects, and the frames in each thread; a /2 report writes each process
as a row of values (in the order of "process_keys", its threads' in the order of "thread_keys")
and names each thread's stack class ("stack", an index into "stacks", whose frames are indexes
into "frames", their names into "strings"). `expand(doc)` makes a /2 report's rows objects and
gives each thread "frames" and "python_frames" as /1 writes them (but "pc", which /2 leaves out:
null), and returns doc; a /1 report, or one of --full, is returned as it is."""
import json


def _frame(doc, i):
    kind, fn, file, line, mod, off, _pc, local = doc["frames"][i]
    s = doc["strings"]
    return {"kind": "python" if kind else "native", "function": s[fn] if fn is not None else None,
            "file": s[file] if file is not None else None, "line": line or None,
            "module": s[mod] if mod is not None else None,
            "offset": off if isinstance(off, str) else hex(off) if kind == 0 or off else None,
            "pc": None, "locals": local}


def expand(doc):
    if doc.get("schema") != "hangdx.report/2":
        return doc
    if "process_keys" in doc:
        pk, tk = doc["process_keys"], doc["thread_keys"]
        doc["processes"] = [dict(zip(pk, row)) for row in doc["processes"]]
        for p in doc["processes"]:
            p["threads"] = [dict(zip(tk, row)) for row in p["threads"]]
    for p in doc.get("processes") or []:
        for t in p.get("threads") or []:
            if "stack" not in t:
                continue
            cls = doc["stacks"][t["stack"]]
            for key in ("frames", "python_frames"):
                t[key] = None if cls[key] is None else [_frame(doc, i) for i in cls[key]]
    return doc


def loads(text):
    """json.loads of a report, expanded."""
    return expand(json.loads(text))
