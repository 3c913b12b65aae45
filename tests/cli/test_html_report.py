#!/usr/bin/env python3
"""The HTML report (docs/design.md "The HTML report"), run by headless Chromium.

On a synthetic Megatron job (gen-synthetic-job: 32 ranks, TP 2 x PP 4 x DP 4, rank 13 skipped
its TP group's all_reduce) and on the real 3-rank gloo hang of bench-data (no process groups),
`hangdx analyze --html FILE --json` writes the page and the report; then:
  - the page as written: no http(s) src or href, no fetch( or XMLHttpRequest, no <link>, and
    its data holds no '<' (nothing in it can end its script element);
  - the DOM after the scripts ran (--dump-dom): the verdict's class and summary (the JSON
    report's), the culprit rank's chip, the culprit's node of the waits-for graph, the grid's
    layout note, the culprit's branch of the stack tree, and (file#rank=N) that rank's stack;
  - a screenshot at --window-size=1280,900 is a PNG of exactly that size (its IHDR);
  - the net log (--log-net-log) of a run whose host resolver answers nothing holds no request
    that the page started (Chromium's own, its update and account checks, carry the initiator
    "not an origin" and are not the page's); a control page with one http image shows that
    the check sees a page's request.
The gloo verdict needs no graph (no groups were read); the page builds one, as the dot export does.
A snapshot whose function name holds '</script><b id="pwned">' shows that text as text: no such
element in the DOM. Skips (77) without chromium. Needs $HANGDX and $HDX_SOURCE_DIR."""
import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HANGDX = os.environ["HANGDX"]
SRC = os.environ["HDX_SOURCE_DIR"]
GLOO = os.path.join(SRC, "scripts", "benchmarks", "bench-data", "gloo_collective_skip.snapshot.json")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
failed = 0


def check(ok, what):
    global failed
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failed += 1


def chromium(tmp, *args):
    """Run headless Chromium with a throwaway profile; its stdout."""
    env = dict(os.environ, HOME=tmp)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           # the browser's own traffic (updates, sync, spelling dictionaries), not the page's
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-default-apps", "--disable-extensions", "--no-default-browser-check",
           "--disable-features=SpellCheck,OptimizationHints,MediaRouter,Translate",
           "--user-data-dir=" + os.path.join(tmp, "profile"), '--host-resolver-rules=MAP * ~NOTFOUND'] + list(args)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    return r.stdout


def analyze(tmp, name, inputs):
    """hangdx analyze --json --html: (page path, page text, the JSON report)."""
    page = os.path.join(tmp, name + ".html")
    r = subprocess.run([HANGDX, "analyze", "--json", "--html", page] + inputs, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("hangdx analyze failed (%d): %s" % (r.returncode, r.stderr))
    with open(page, encoding="utf-8") as f:
        return page, f.read(), json.loads(r.stdout)


def static_checks(name, text):
    check(not re.search(r'''(src|href)\s*=\s*["']?\s*(https?:)?//''', text, re.I), name + ": no http(s) or //host src/href")
    check("fetch(" not in text and "XMLHttpRequest" not in text and "WebSocket" not in text,
          name + ": no fetch(, XMLHttpRequest or WebSocket")
    check("<link" not in text.lower() and "@import" not in text and not re.search(r"url\((?!#)", text),
          name + ": no <link>, @import or url() but of the page's own #ids")
    m = re.search(r'<script type="application/json" id="hdx-data">(.*?)</script>', text, re.S)
    check(m is not None and "<" not in m.group(1), name + ": the data holds no '<'")
    return json.loads(m.group(1)) if m else None


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def page_requests(path):
    """The requests of the net log that a page started: URL_REQUEST_START_JOB events whose
    initiator is an origin (the browser's own, its updates and sync, say "not an origin"), as
    (url, initiator); and the number of events."""
    with open(path, encoding="utf-8", errors="replace") as f:
        log = json.load(f)
    types = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    out = []
    for e in log["events"]:
        p = e.get("params") or {}
        if types.get(e["type"]) == "URL_REQUEST_START_JOB" and "url" in p and p.get("initiator") != "not an origin":
            out.append((p.get("url"), p.get("initiator")))
    return out, len(log["events"])


def main():
    if not CHROMIUM:
        print("SKIP: no chromium (Debian's package chromium; scripts/setup installs it)")
        return 77
    tmp = tempfile.mkdtemp(prefix="hdx-html-")
    try:
        job = os.path.join(tmp, "job")
        subprocess.run([sys.executable, os.path.join(SRC, "scripts", "benchmarks", "gen-synthetic-job"), "--hosts", "4",
                        "--threads", "3", "--frames", "20", "--layout", "2,4,4", "--culprit", "13", GLOO, job],
                       check=True, capture_output=True)
        page, text, report = analyze(tmp, "megatron", [job])
        v = report["verdict"]
        check(v["class"] == "collective_wait" and v["culprit_ranks"] == [13], "megatron: the verdict is collective_wait, rank 13")
        data = static_checks("megatron", text)
        check(data is not None and data["grid"] == {"tp": 2, "pp": 4, "dp": 4}, "megatron: the page's grid is TP 2 x PP 4 x DP 4")
        print("megatron: the page is %d bytes" % len(text.encode()))

        dom = chromium(tmp, "--dump-dom", "file://" + page + "#rank=13")
        check('id="class">collective_wait<' in dom, "megatron DOM: the class")
        check(html.escape(v["summary"], quote=False) in dom, "megatron DOM: the summary, as the JSON report words it")
        check(re.search(r'<span class="rank" id="culprit-13" data-rank="13">13</span>', dom) is not None,
              "megatron DOM: the culprit's chip")
        node = re.search(r'<g class="node culprit" id="node-\d+" data-ranks="13" data-culprit="1"', dom)
        check(node is not None, "megatron DOM: the waits-for graph's culprit node, rank 13")
        check(len(re.findall(r'<g class="node', dom)) == 3 and len(re.findall(r'<path class="edge"', dom)) == 3,
              "megatron DOM: the graph's 3 nodes (ranks 0-11,14-31; 12; 13) and 3 edges")
        check(re.search(r'<g class="node" id="node-\d+" data-ranks="12" data-culprit="0"', dom) is not None,
              "megatron DOM: rank 12, which waits for 13 in its TP group, is a node of its own")
        check("TP 2 × PP 4 × DP 4" in dom, "megatron DOM: the grid's layout")
        check(re.search(r'<h3 id="rank-13" data-rank="13">rank 13 — culprit</h3>', dom) is not None and
              "waits: sleep; TP 1, PP stage 1, DP 2" in dom and "<li>skip_and_sleep (hangs.py:149)</li>" in dom,
              "megatron DOM: #rank=13 shows rank 13's place and its stack (skip_and_sleep)")
        check(re.search(r'<details class="culprit" data-ranks="13" open="">', dom) is not None,
              "megatron DOM: the stack tree's branch of rank 13, open, marked culprit")

        shot = os.path.join(tmp, "shot.png")
        netlog = os.path.join(tmp, "net.json")
        chromium(tmp, "--screenshot=" + shot, "--window-size=1280,900", "--log-net-log=" + netlog, "file://" + page)
        check(png_size(shot) == (1280, 900), "megatron: the screenshot is a 1280x900 PNG (IHDR %s)" % (png_size(shot),))
        requests, n_events = page_requests(netlog)
        check(n_events > 0 and not requests, "megatron: the net log (%d events) has no request the page started: %s"
              % (n_events, requests))
        # The check sees a page's request: a page with one image from the network.
        control = os.path.join(tmp, "control.html")
        with open(control, "w", encoding="utf-8") as f:
            f.write('<!DOCTYPE html><img src="http://hdx-test.invalid/x.png">')
        chromium(tmp, "--screenshot=" + shot, "--window-size=200,100", "--log-net-log=" + netlog, "file://" + control)
        requests, _ = page_requests(netlog)
        check([u for u, _ in requests] == ["http://hdx-test.invalid/x.png"],
              "control: the net log shows the request of a page that loads an image (%s)" % requests)

        # The real 3-rank gloo hang: no process groups, a plain grid; a forged function name.
        with open(GLOO, encoding="utf-8") as f:
            snap = json.load(f)
        for p in snap["processes"]:  # a hangdx.snapshot/1: frames as objects
            for t in p["threads"]:
                for fr in t["frames"] or []:
                    if fr["function"] == "skip_and_sleep":
                        fr["function"] = 'skip_and_sleep</script><b id="pwned">x</b>'

        forged = os.path.join(tmp, "forged.snapshot.json")
        with open(forged, "w", encoding="utf-8") as f:
            json.dump(snap, f)
        page, text, report = analyze(tmp, "gloo", [forged])
        static_checks("gloo", text)
        print("gloo: the page is %d bytes" % len(text.encode()))
        dom = chromium(tmp, "--dump-dom", "file://" + page)
        check('id="culprit-2" data-rank="2"' in dom and report["verdict"]["culprit_ranks"] == [2], "gloo DOM: culprit rank 2")
        check("The process groups are not known: the ranks in order, 3 a row." in dom, "gloo DOM: a plain grid")
        check(re.search(r'<g class="node culprit" id="node-\d+" data-ranks="2" data-culprit="1"', dom) is not None and
              re.search(r'<g class="node" id="node-\d+" data-ranks="0-1" data-culprit="0"', dom) is not None and
              len(re.findall(r'<path class="edge"', dom)) == 1 and "every collective taken on the world group" in dom,
              "gloo DOM: the graph built for the page (the verdict needed none): ranks 0-1 wait for rank 2, the culprit")
        check('<b id="pwned">' not in dom and "skip_and_sleep&lt;/script&gt;&lt;b id=\"pwned\"&gt;x&lt;/b&gt;" in dom,
              "gloo DOM: a function name with </script> and markup is shown as text, no element made of it")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
