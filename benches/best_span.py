#!/usr/bin/env python3
"""best_span (ground-v1 spec section 8) written with difflib, for timing
against grove's Rust implementation (`grove-bench grounding`).

Reads JSON from stdin: {"texts": [...], "quotes": [...]}.
Writes JSON to stdout: {"results": [{"span", "ratio", "seconds"}, ...]},
seconds being this thread's CPU time (the machines are shared, so CPU time
is steadier than wall time; the Rust side measures the same clock).

The search is the straightforward one, with difflib's own cheap upper
bounds (real_quick_ratio, quick_ratio) to skip windows that cannot beat the
best ratio so far, as difflib.get_close_matches does.
"""

import difflib
import json
import re
import sys
import time
import unicodedata

WORD = re.compile(r"[\w'\u2019]+")
EDGE = set(".,;:!?'\"()[]{}_*-\u2013\u2014\u2026\u2018\u2019\u201c\u201d")


def norm(s):
    s = unicodedata.normalize("NFKC", s).lower()
    s = s.replace("\u2019", "'").replace("\u2018", "'")
    s = "".join(c if (c.isalnum() or c == "'") else " " for c in s)
    return re.sub(" +", " ", s).strip(" ")


def is_edge(c):
    return c.isspace() or c in EDGE


def trim_edge(s):
    start, end = 0, len(s)
    while start < end and is_edge(s[start]):
        start += 1
    while end > start and is_edge(s[end - 1]):
        end -= 1
    return s[start:end]


def best_span(q, texts):
    target = norm(q)
    n = len(target.split())
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(target)
    best_ratio, best_span_text = 0.0, ""
    for text in texts:
        words = [(m.start(), m.end(), norm(m.group())) for m in WORD.finditer(text)]
        for size in range(max(1, n - 2), n + 3):
            for i in range(0, len(words) - size + 1):
                key = " ".join(w[2] for w in words[i:i + size])
                matcher.set_seq1(key)
                if matcher.real_quick_ratio() <= best_ratio:
                    continue
                if matcher.quick_ratio() <= best_ratio:
                    continue
                r = matcher.ratio()
                if r > best_ratio:
                    best_ratio = r
                    best_span_text = trim_edge(text[words[i][0]:words[i + size - 1][1]])
    if best_ratio <= 0.0:
        return "", 0.0
    return best_span_text, best_ratio


def main():
    case = json.load(sys.stdin)
    results = []
    for q in case["quotes"]:
        start = time.thread_time()
        span, ratio = best_span(q, case["texts"])
        results.append({"span": span, "ratio": ratio,
                        "seconds": time.thread_time() - start})
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
