#!/usr/bin/env bash
# TIRA entry point: ./my-software.sh -i IN -o OUT [-c CONFIG] [-q QUALITY] [-w WORKDIR]
#   IN  holds one of three inputs, told apart by its files:
#       the task's topics.xml and passages.jsonl.gz (or passages.jsonl);
#       TIRA's full-rank input, queries.jsonl and documents.jsonl (or .jsonl.gz);
#       TIRA's re-rank input, rerank.jsonl.gz (any first stage's candidates with their texts: reranked by the
#       configuration's later stages, the second stage, quality and stance)
#   OUT gets run.txt (qid STANCE doc rank score tag), written only when the run is complete and valid
#   Without -i / -o, TIRA's environment variables TIRA_INPUT_DATASET / TIRA_OUTPUT_DIR are used.
# On a Ray cluster: KUERI_RAY=ADDRESS (auto, or the head's host:port) runs the topics as tasks of that cluster, a few
#   topics a task (the same run.txt; every node needs kueri[ray] and must see the work folder, docs/scale-out.md).
# The default configuration is the best automatic one (no judgments, no network).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage() { echo "usage: $0 -i INPUT_DIR -o OUTPUT_DIR [-c CONFIG] [-q offline|debater-2022|FILE|none] [-w WORKDIR]" >&2; echo "  -i, -o: default \$TIRA_INPUT_DATASET, \$TIRA_OUTPUT_DIR (TIRA sets them)" >&2; echo "  KUERI_RAY=ADDRESS: the topics as tasks of that Ray cluster (auto, or host:port)" >&2; echo "  CONFIG: default (the best automatic one), auto-minilm-e5, auto-neural, auto-lexical, quality-rerank, row-01..row-24 (kueri configs)" >&2; exit 2; }
input="${TIRA_INPUT_DATASET:-}" output="${TIRA_OUTPUT_DIR:-}" config="default" workdir=() quality=()
while getopts "i:o:c:q:w:h" opt; do
  case "$opt" in
    i) input="$OPTARG" ;;
    o) output="$OPTARG" ;;
    c) config="$OPTARG" ;;
    q) quality=(--quality "$OPTARG") ;;
    w) workdir=(--workdir "$OPTARG") ;;
    *) usage ;;
  esac
done
[ -n "$input" ] && [ -n "$output" ] || usage
python="${KUERI_PYTHON:-}"
if [ -z "$python" ]; then
  if [ -x "$here/.venv/bin/python" ]; then python="$here/.venv/bin/python"; else python="python3"; fi
fi
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" -m kueri tira -i "$input" -o "$output" --config "$config" "${quality[@]}" "${workdir[@]}"
