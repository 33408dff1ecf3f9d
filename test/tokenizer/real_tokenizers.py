"""The tokenizer directories of test/data/tokenizers/ for the reference generators.

The real tokenizers (llama2, llama3, llama3.1, qwen3) are committed with tokenizer.json
compressed as tokenizer.json.xz (test/data/tokenizers/README.md). tokenizer_dir() gives a
directory that holds a plain tokenizer.json all the same: for those four a temporary copy
of the source directory with the JSON decompressed by Python's own lzma (no xz, no build
tree needed; removed when the generator exits), for the plain ones (families/*, smollm2-t5)
the source directory itself. Goldens are still written to the source directories.
"""
import atexit
import lzma
import os
import shutil
import tempfile

DATA = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                     "tokenizers"))
_unpacked = {}


def tokenizer_dir(name):
    """A directory with NAME's files (NAME as under test/data/tokenizers, e.g. "llama3" or
    "families/qwen2") and a plain tokenizer.json."""
    src = os.path.join(DATA, name)
    packed = os.path.join(src, "tokenizer.json.xz")
    if not os.path.exists(packed):
        return src
    if name not in _unpacked:
        tmp = tempfile.mkdtemp(prefix="ftmpi-tokenizer-")
        atexit.register(shutil.rmtree, tmp, True)
        out = os.path.join(tmp, os.path.basename(name))
        os.mkdir(out)
        for f in sorted(os.listdir(src)):
            path = os.path.join(src, f)
            if path == packed:
                with lzma.open(path) as z, open(os.path.join(out, "tokenizer.json"), "wb") as o:
                    shutil.copyfileobj(z, o)
            elif os.path.isfile(path):
                shutil.copy(path, out)
        _unpacked[name] = out
    return _unpacked[name]


def tokenizer_json(name):
    """The path of a plain tokenizer.json of NAME (see tokenizer_dir)."""
    return os.path.join(tokenizer_dir(name), "tokenizer.json")
