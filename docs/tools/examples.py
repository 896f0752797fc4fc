#!/usr/bin/env python3
"""Extracts the tagged examples of Markdown pages (docs/check-examples.sh runs it).

A tag is an HTML comment on the line before a fenced block:

    <!-- file=NAME -->   the block is the file NAME of the page's example directory
                         (.c: a C program, .go: a Go program, .py: a Python script,
                         .yaml: a manifest checked against the CRDs)
    <!-- run -->         the block is a shell script run in that directory, once against an
                         embedded library and once through a sidecar
    <!-- output -->      the block is what the run block before it prints, exactly

    examples.py extract OUT_DIR PAGE...
    examples.py links PAGE...

writes, for each page with tags, OUT_DIR/<n>/ with the files, run-<k>.sh and run-<k>.out,
and prints one line per page: "<n> <page>". A tag with no fenced block after it, an
output with no run before it, or two files of one name on a page fail with the page and
line.

`links` prints each relative link (outside code) whose target does not exist, and exits 1
if there is one.
"""
import os
import re
import sys

TAG = re.compile(r"^<!--\s*(file=(?P<file>[A-Za-z0-9_.-]+)|(?P<kind>run|output))\s*-->\s*$")
FENCE = re.compile(r"^(```+|~~~+)")


def blocks(path):
    """Yields (line, tag, name, text) for each tagged fenced block of the page."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = TAG.match(lines[i].strip())
        if not m:
            i += 1
            continue
        at = i + 1
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        f = FENCE.match(lines[j]) if j < len(lines) else None
        if not f:
            sys.exit(f"{path}:{at}: the tag is not followed by a fenced block")
        fence = f.group(1)
        end = j + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        if end == len(lines):
            sys.exit(f"{path}:{j + 1}: the fenced block is not closed")
        text = "\n".join(lines[j + 1:end]) + "\n"
        kind = "file" if m.group("file") else m.group("kind")
        yield at, kind, m.group("file"), text
        i = end + 1


def extract(out, pages):
    n = 0
    for page in pages:
        found = list(blocks(page))
        if not found:
            continue
        n += 1
        d = os.path.join(out, str(n))
        os.makedirs(d)
        names, runs, last = set(), 0, None
        for line, kind, name, text in found:
            if kind == "file":
                if name in names:
                    sys.exit(f"{page}:{line}: a second file named {name}")
                names.add(name)
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            elif kind == "run":
                runs += 1
                last = runs
                with open(os.path.join(d, f"run-{runs}.sh"), "w") as f:
                    f.write(f"# {page}:{line}\n" + text)
            else:
                if last is None:
                    sys.exit(f"{page}:{line}: an output block with no run block before it")
                with open(os.path.join(d, f"run-{last}.out"), "w") as f:
                    f.write(text)
                last = None
        print(n, page)


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def links(pages):
    bad = 0
    for page in pages:
        text = open(page, encoding="utf-8").read()
        text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)  # fenced code
        text = re.sub(r"`[^`\n]*`", "", text)  # inline code
        for target in LINK.findall(text):
            path = target.split("#", 1)[0]
            if not path or re.match(r"^[a-z]+:", path):
                continue
            if not os.path.exists(os.path.join(os.path.dirname(page), path)):
                print(f"{page} links to {target}, which does not exist")
                bad = 1
    return bad


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "extract":
        extract(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) >= 2 and sys.argv[1] == "links":
        sys.exit(links(sys.argv[2:]))
    else:
        sys.exit("usage: examples.py extract OUT_DIR PAGE... | examples.py links PAGE...")
