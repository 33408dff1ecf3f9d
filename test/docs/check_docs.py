#!/usr/bin/env python3
"""Checks README.md and doc/*.md against the built tools, so the docs cannot drift.

usage: check_docs.py SRCDIR HELPDIR

HELPDIR holds what the built tools print: config.txt (`ftmpi --help-config`) and one
TOOL.txt per tool (`TOOL --help`, with every subcommand's help appended). Nothing here
lists flags or keys: they come from those files. Checked:
  * every --flag (and -x) on a command line of an ftmpi tool in a code block or inline
    code, and every --flag that a tool's own page (doc/prep.md, ...) names in inline code,
    is in that tool's help;
  * every configuration key that a doc names is a key of --help-config: KEY=VALUE
    arguments of ftmpi (and of demo.sh and the job scripts, which pass them on),
    `key = value` in inline code, dotted names of a configuration group in inline code,
    and the keys of libconfig snippets (tracking `group = { ... }` nesting);
  * no doc refers to an issue number or a path outside the repository (nor do the
    comments of the shipped decks in input/ and job scripts in jobs/, which users read).
Prints one line per finding and exits 1 when there is any.
"""
import os
import re
import sys

src, helpdir = sys.argv[1], sys.argv[2]
docs = ["README.md"] + sorted("doc/" + f for f in os.listdir(os.path.join(src, "doc"))
                              if f.endswith(".md"))

# what users read besides the docs: references only
readables = [d + "/" + f for d in ("input", "jobs") if os.path.isdir(os.path.join(src, d))
             for f in sorted(os.listdir(os.path.join(src, d)))]

helps = {}
for f in os.listdir(helpdir):
    if f.endswith(".txt") and f != "config.txt":
        helps[f[:-4]] = open(os.path.join(helpdir, f), encoding="utf-8").read()
config_text = open(os.path.join(helpdir, "config.txt"), encoding="utf-8").read()
keys = set(re.findall(r"^\| `([a-z0-9_.]+)` \|", config_text, re.M))
if len(keys) < 20:
    sys.exit("check_docs: --help-config lists only %d keys" % len(keys))
groups = {".".join(k.split(".")[:i]) for k in keys for i in range(1, k.count(".") + 1)}
leaves = {k.split(".")[-1] for k in keys}
# the page of each tool, whose tables name its flags without the tool's name
tool_pages = {"doc/prep.md": "ftmpi-prep", "doc/convert.md": "ftmpi-convert",
              "doc/generate.md": "ftmpi-generate"}
# commands that pass KEY=VALUE arguments on to ftmpi
passes_overrides = ("ftmpi", "demo.sh", "sbatch")
tool_re = re.compile(r"(?<![\w./-])(?:[\w.$/{}-]*/)?(" + "|".join(
    sorted((re.escape(t) for t in helps), key=len, reverse=True)) + r")(?![\w.-])")

findings = []
checked = {"flags": 0, "keys": 0}


def finding(doc, line, msg):
    findings.append("%s:%d: %s" % (doc, line, msg))


def help_has(tool, flag):
    checked["flags"] += 1
    return re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", helps[tool]) is not None


def check_key(doc, line, key, how):
    checked["keys"] += 1
    if key not in keys and key not in groups:
        finding(doc, line, "%s names configuration key '%s', which ftmpi --help-config "
                "does not list" % (how, key))


def check_command(doc, line, text):
    """A shell command line (continuations joined): flags of ftmpi tools, overrides."""
    for seg in re.split(r"\|\||&&|[|;]|\$\(|`", text):
        seg = seg.split(" #")[0]
        m = tool_re.search(seg)
        words = seg.split()
        if m:
            tool = m.group(1)
            rest = seg[m.end():].split()
            for w in rest:
                if w.startswith("-") and not re.match(r"^-\d", w) and w not in ("-", "--"):
                    flag = w.split("=")[0]
                    if re.match(r"^--?[A-Za-z][\w-]*$", flag) and not help_has(tool, flag):
                        finding(doc, line, "%s has no option %s (not in its --help)" % (tool, flag))
            owner = tool
        else:
            owner = next((w for w in words if w.endswith(passes_overrides)), None)
        if owner and (owner == "ftmpi" or owner.endswith(("demo.sh", "sbatch"))):
            for w in words:
                mm = re.match(r"^([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)=(?!=)\S", w)
                if mm:
                    check_key(doc, line, mm.group(1), "the command line")


def check_libconfig(doc, start, lines):
    """`name = value;` and `name = { ... };` lines of a libconfig snippet."""
    stack = []
    for i, ln in enumerate(lines):
        code = ln.split("#")[0]
        for m in re.finditer(r"([A-Za-z_][\w-]*)\s*=\s*(\{)?|(\})", code):
            if m.group(3):
                if stack:
                    stack.pop()
                continue
            path = ".".join(stack + [m.group(1)])
            if m.group(2):
                if path not in groups:
                    finding(doc, start + i, "libconfig group '%s' is not a configuration group"
                            % path)
                stack.append(m.group(1))
            else:
                check_key(doc, start + i, path, "a config snippet")


def looks_libconfig(lines):
    body = [l for l in lines if l.strip() and not l.strip().startswith("#")]
    return body and sum(bool(re.match(r"^\s*([a-z_][\w]*\s*=.*(;|\{)|\};?)\s*(#.*)?$", l))
                        for l in body) * 2 >= len(body)


def check_references(doc, lines):
    for n, ln in enumerate(lines, 1):
        if re.search(r"\bissues? #\d|\(#\d+\)|\bissue \d+\b", ln, re.I):
            finding(doc, n, "refers to an issue number")
        for p in re.findall(r"(?<![\w.~$}-])(/(?:work|home|root|shared)/[\w./-]*)", ln):
            finding(doc, n, "refers to a path outside the repository: %s" % p)
        if re.search(r"\.\./shared/|shared/docs|reference-formats", ln):
            finding(doc, n, "refers to a document outside the repository")


for f in readables:
    path = os.path.join(src, f)
    if os.path.isfile(path):
        check_references(f, open(path, encoding="utf-8", errors="replace").read().split("\n"))

for doc in docs:
    text = open(os.path.join(src, doc), encoding="utf-8").read()
    lines = text.split("\n")
    check_references(doc, lines)
    # -- code blocks
    n = 0
    while n < len(lines):
        if lines[n].lstrip().startswith("```"):
            start = n + 1
            n += 1
            block = []
            while n < len(lines) and not lines[n].lstrip().startswith("```"):
                block.append(lines[n])
                n += 1
            if looks_libconfig(block):
                check_libconfig(doc, start + 1, block)
            else:
                joined, first = "", None
                for i, ln in enumerate(block):
                    if first is None:
                        first = start + 1 + i
                    if ln.rstrip().endswith("\\"):
                        joined += ln.rstrip()[:-1] + " "
                        continue
                    check_command(doc, first, joined + ln)
                    joined, first = "", None
        n += 1
    # -- inline code
    for n, ln in enumerate(lines, 1):
        if ln.lstrip().startswith("```"):
            continue
        for span in re.findall(r"`([^`\n]+)`", ln):
            s = span.strip()
            if tool_re.search(s):
                check_command(doc, n, s)
            elif s.startswith("--") and doc in tool_pages:
                # the page's tool, or a cross-reference to another tool's option
                flag = re.split(r"[ =]", s)[0]
                if re.match(r"^--[a-z][\w-]*$", flag) and \
                        not any(help_has(t, flag) for t in helps):
                    finding(doc, n, "%s has no option %s (not in its --help)" %
                            (tool_pages[doc], flag))
            m = re.match(r"^([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)\s*=\s*([^=].*)$", s)
            # `key=value`, `name = value;`: the syntax shown with placeholders
            if m and re.match(r"^value\b", m.group(2)):
                m = None
            if m:
                k = m.group(1)
                first = k.split(".")[0]
                if "." in k and first in groups:
                    check_key(doc, n, k, "inline code")
                elif "." not in k and k not in keys and k not in leaves and \
                        doc in ("README.md", "doc/user-guide.md", "doc/config.md"):
                    check_key(doc, n, k, "inline code")
            elif re.match(r"^[a-z_]+\.[a-z_][a-z0-9_.]*$", s) and s.split(".")[0] in groups \
                    and doc in ("README.md", "doc/user-guide.md", "doc/config.md",
                                "doc/design.md", "doc/slurm.md"):
                if not re.search(r"\.(h5|json|jsonl|cfg|safetensors|md|txt|py|sh|png)$", s):
                    check_key(doc, n, s, "inline code")
    # libconfig inline: `model = { weights = "model.h5"; }`
    for n, ln in enumerate(lines, 1):
        for span in re.findall(r"`([a-z_]+ = \{[^`]*\})`", ln):
            check_libconfig(doc, n, [span])

for f in findings:
    print(f)
print("check_docs: %d docs against %d configuration keys and %d tools' help: %d option and "
      "%d key mentions checked, %d findings" % (len(docs), len(keys), len(helps),
                                                checked["flags"], checked["keys"], len(findings)))
sys.exit(1 if findings else 0)
