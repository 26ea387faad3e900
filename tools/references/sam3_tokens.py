"""Token ids of a corpus of phrases by Meta's own SAM 3 tokenizer (sam3 0.1.4's
`sam3/model/tokenizer_ve.py`, `SimpleTokenizer` with the 32-token context SAM 3's text encoder
uses): the reference the Rust tokenizer is held to (tests/it/concept.rs).

The module is loaded from its file, so that `import sam3` (which imports triton and the video
predictor) is not run; iopath, which it only uses to open the vocabulary, is given as a stand-in
that opens local files.

    sam3_tokens.py --vocab bpe_simple_vocab_16e6.txt.gz --phrases sam3_phrases.json --out tokens.json
"""

import argparse
import importlib.util
import json
import os
import sys
import types


def meta_tokenizer_module():
    spec = importlib.util.find_spec("sam3")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("sam3 is not installed (tools/setup/setup-sam3.sh)")
    path = os.path.join(list(spec.submodule_search_locations)[0], "model", "tokenizer_ve.py")
    file_io = types.ModuleType("iopath.common.file_io")
    file_io.g_pathmgr = types.SimpleNamespace(open=open)
    for name in ("iopath", "iopath.common"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["iopath.common.file_io"] = file_io
    module_spec = importlib.util.spec_from_file_location("sam3_tokenizer_ve", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--phrases", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    module = meta_tokenizer_module()
    tokenizer = module.SimpleTokenizer(bpe_path=args.vocab, context_length=32)
    with open(args.phrases, encoding="utf-8") as f:
        phrases = json.load(f)["phrases"]
    cases = []
    for phrase in phrases:
        framed = tokenizer(phrase)[0].tolist()
        cases.append({
            "phrase": phrase,
            "encoded": tokenizer.encode(phrase),
            "ids": framed,
        })
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"context_length": 32, "cases": cases}, f, ensure_ascii=True, indent=1)
    print(f"[sam3-tokens] {len(cases)} phrases tokenized by Meta's SimpleTokenizer")


if __name__ == "__main__":
    main()
