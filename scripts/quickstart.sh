#!/usr/bin/env bash
# Runs the quickstart example fully offline on the embedded default (SQLite file, HNSW index,
# local MiniLM embeddings). Fetches and verifies the model files first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
cargo run --release --example quickstart
