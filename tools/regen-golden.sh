#!/usr/bin/env bash
# Rewrites tests/golden/*.txt from the current build's summaries and refusals (tests/cli/test_golden.sh).
#   tools/regen-golden.sh [BUILD_DIR]     (default: build)
# Read `git diff tests/golden` afterwards: every change there is a change users see.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
REGEN_GOLDEN=1 bash tests/cli/test_golden.sh "$BUILD/gguf-reap" "$BUILD/gguf-reap-gen" ../shared
git status --short tests/golden
