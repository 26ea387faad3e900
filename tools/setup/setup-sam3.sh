#!/usr/bin/env bash
# SAM 3 (issue 59): Meta's code (PyPI sam3 0.1.4) in a small venv over setup-real.sh's, and the
# token ids Meta's own tokenizer gives a corpus of phrases (tools/references/sam3_tokens.py), which
# the Rust tokenizer is held to (tests/it/concept.rs). CLIP's vocabulary comes from samexporter's
# wheel in the real venv (sam3's wheel lacks it); nothing of it is copied into the repository.
# Cached outside the repository:
#   $SAM2_DEV_CACHE/sam3/venv/            sam3 alone (--no-deps), then a .pth line adding the real
#                                         venv after it; keyed by both requirement files
#   $SAM2_DEV_CACHE/sam3/tokens-<hash>/   keyed by the script, the corpus, the pins: tokens.json
#   $SAM2_DEV_CACHE/sam3/reduced-<hash>/  keyed by the exporter and the pins: the reduced export
#                                         with its click head (four graphs, the vocabulary,
#                                         manifest.json), its check.json and the click head's check
#     reference-<hash>/reference.json     keyed by the script, the export and the image: what
#                                         Meta's own Sam3Processor finds on testdata/demo.ppm with
#                                         the export's weights (tools/references/sam3_reference.py),
#                                         which the Rust pipeline is held to
# Sourced by scripts/test.sh after setup-real.sh, whose venv it needs (it sources that script first
# when the venv is missing). Exports SAM2_SAM3_VOCAB, SAM2_SAM3_TOKENS, SAM2_SAM3_MODELS and
# SAM2_SAM3_REFERENCE.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${SAM2_DEV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sam2-dev}"
REAL_VENV="$CACHE/real-venv"
say() { printf '[setup-sam3] %s\n' "$*" >&2; }
. "$ROOT/tools/setup/setup-times.sh"
export ORT_DISABLE_TELEMETRY=1
real_req_hash="$(sha256sum "$ROOT/tools/setup/real-requirements.txt" | cut -c1-16)"
if [ ! -f "$REAL_VENV/.sam2-req-$real_req_hash" ]; then
    say "setup-real.sh's venv is missing: making it first"
    . "$ROOT/tools/setup/setup-real.sh"
    say() { printf '[setup-sam3] %s\n' "$*" >&2; }
fi
SAM3_VENV="$CACHE/sam3/venv"
setup_begin "SAM 3's venv (Meta's sam3 over the real exporters' venv)"
sam3_req_hash="$(cat "$ROOT/tools/setup/sam3-requirements.txt" "$ROOT/tools/setup/real-requirements.txt" \
    | sha256sum | cut -c1-16)"
if [ ! -f "$SAM3_VENV/.sam2-req-$sam3_req_hash" ]; then
    say "creating $SAM3_VENV: sam3 0.1.4 over $REAL_VENV"
    venv_over_real "$SAM3_VENV" "$ROOT/tools/setup/sam3-requirements.txt"
    touch "$SAM3_VENV/.sam2-req-$sam3_req_hash"
    setup_end ran
else
    setup_end cached
fi
SAM3_VOCAB="$("$SAM3_VENV/bin/python" -c 'import importlib.util, os; s = importlib.util.find_spec("samexporter"); print(os.path.join(list(s.submodule_search_locations)[0], "assets", "bpe_simple_vocab_16e6.txt.gz"))')"
[ -f "$SAM3_VOCAB" ] || { say "CLIP's vocabulary is not in samexporter's wheel at $SAM3_VOCAB"; return 1; }

setup_begin "Meta's SAM 3 tokenizer on the phrase corpus (tools/references/sam3_tokens.py)"
tokens_hash="$(cat "$ROOT/tools/references/sam3_tokens.py" "$ROOT/tools/references/sam3_phrases.json" \
    "$ROOT/tools/setup/sam3-requirements.txt" "$ROOT/tools/setup/real-requirements.txt" \
    | sha256sum | cut -c1-16)"
SAM3_TOKENS="$CACHE/sam3/tokens-$tokens_hash"
made_once "$SAM3_TOKENS" .sam2-sam3-tokens-done tokens.log \
    "tokenizing the phrase corpus with Meta's SimpleTokenizer into $SAM3_TOKENS" \
    "$SAM3_VENV/bin/python" "$ROOT/tools/references/sam3_tokens.py" \
    --vocab "$SAM3_VOCAB" --phrases "$ROOT/tools/references/sam3_phrases.json" \
    --out "$SAM3_TOKENS/tokens.json"

# The reduced, shape-faithful export (sam2-export-sam3 --config reduced: seeded random weights, their
# scores sharpened, every interface shape of the full model; under a minute), held to Meta's code
# on the same weights (tools/references/sam3_export_check.py; seconds).
TOOLS="$ROOT/tools/sam2-tools/sam2_tools"
setup_begin "SAM 3's reduced export with its click head (sam2-export-sam3 --config reduced --interactive)"
export_hash="$(cat "$TOOLS/export_sam3.py" "$ROOT/tools/setup/sam3-requirements.txt" \
    "$ROOT/tools/setup/real-requirements.txt" | sha256sum | cut -c1-16)"
SAM3_MODELS="$CACHE/sam3/reduced-$export_hash"
made_once "$SAM3_MODELS" .sam2-sam3-export-done export.log \
    "exporting SAM 3's reduced configuration with its click head into $SAM3_MODELS" \
    env PYTHONPATH="$ROOT/tools/sam2-tools" "$SAM3_VENV/bin/python" -m sam2_tools.export_sam3 \
    --config reduced --interactive --out "$SAM3_MODELS"
setup_begin "SAM 3's export against Meta's code (tools/references/sam3_export_check.py)"
check_hash="$( (cat "$ROOT/tools/references/sam3_export_check.py"; echo "$export_hash") | sha256sum | cut -c1-16)"
if [ ! -f "$SAM3_MODELS/.sam2-sam3-check-$check_hash" ]; then
    logged "$SAM3_MODELS/check.log" "$SAM3_VENV/bin/python" "$ROOT/tools/references/sam3_export_check.py" \
        --models "$SAM3_MODELS"
    touch "$SAM3_MODELS/.sam2-sam3-check-$check_hash"
    setup_end ran
else
    setup_end cached
fi
# The click head's graphs against Meta's predict_inst on the same weights (seconds).
setup_begin "SAM 3's click head against Meta's code (tools/references/sam3_interactive_check.py)"
click_check_hash="$( (cat "$ROOT/tools/references/sam3_interactive_check.py"; echo "$export_hash") | sha256sum | cut -c1-16)"
if [ ! -f "$SAM3_MODELS/.sam2-sam3-click-check-$click_check_hash" ]; then
    logged "$SAM3_MODELS/click-check.log" "$SAM3_VENV/bin/python" \
        "$ROOT/tools/references/sam3_interactive_check.py" --models "$SAM3_MODELS"
    touch "$SAM3_MODELS/.sam2-sam3-click-check-$click_check_hash"
    setup_end ran
else
    setup_end cached
fi
# What Meta's image processor finds on the demo image with the export's weights (seconds); the
# image is named relative to the repository, as the JSON records it.
setup_begin "Meta's SAM 3 image processor on testdata/demo.ppm (tools/references/sam3_reference.py)"
reference_hash="$( (cat "$ROOT/tools/references/sam3_reference.py"; echo "$export_hash"; \
    cat "$ROOT/testdata/demo.ppm") | sha256sum | cut -c1-16)"
SAM3_REFERENCE="$SAM3_MODELS/reference-$reference_hash"
made_once "$SAM3_REFERENCE" .sam2-sam3-reference-done reference.log \
    "running Meta's Sam3Processor on testdata/demo.ppm into $SAM3_REFERENCE" \
    env -C "$ROOT" "$SAM3_VENV/bin/python" tools/references/sam3_reference.py \
    --models "$SAM3_MODELS" --image testdata/demo.ppm --out "$SAM3_REFERENCE/reference.json"
if declare -F prune_unused >/dev/null; then
    # full-<hash>: tools/setup/setup-sam3-full.sh's export for the benchmark, same key
    prune_unused "$CACHE/sam3" venv "tokens-$tokens_hash" "reduced-$export_hash" "full-$export_hash"
    prune_unused_named "$SAM3_MODELS" reference- "reference-$reference_hash"
fi
export SAM2_SAM3_VOCAB="$SAM3_VOCAB"
export SAM2_SAM3_TOKENS="$SAM3_TOKENS/tokens.json"
export SAM2_SAM3_MODELS="$SAM3_MODELS"
export SAM2_SAM3_REFERENCE="$SAM3_REFERENCE/reference.json"
