#!/usr/bin/env bash
# Runs every fuzz target of the module, one after another, each for SECONDS (default 60).
#
#   bash scripts/fuzz.sh            # every Fuzz* function, 60 s each
#   bash scripts/fuzz.sh 300        # 5 minutes each
#   FUZZ_MATCH=Predicate bash scripts/fuzz.sh 30   # only targets whose name matches
#
# Targets are found with `go test -list '^Fuzz'`, so a new Fuzz function joins without
# editing this script. Each runs with `go test -fuzz`, with -timeout SECONDS+300 so an
# input that hangs fails the run. A failing input is written by Go to the package's
# testdata/fuzz/<Target>/ directory: fix the bug, keep the file (plain `go test` runs
# every file there, so it stays a regression case), and give it a name that says what it
# holds. The seed corpora in testdata/fuzz/ are run by every `go test` (scripts/test.sh).
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

SECONDS_EACH="${1:-60}"
[[ $SECONDS_EACH =~ ^[0-9]+$ ]] || { echo "usage: bash scripts/fuzz.sh [seconds]" >&2; exit 2; }
MATCH="${FUZZ_MATCH:-}"
PARALLEL="${FUZZ_PARALLEL:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}"

log() { printf '==> %s\n' "$*" >&2; }

# `go test -list` prints each package's matching names, then "ok <package> <time>".
listing="$(go test -list '^Fuzz' ./...)" || { log "go test -list failed"; exit 1; }
targets=()
names=()
while IFS= read -r line; do
  case $line in
    Fuzz*) names+=("$line") ;;
    ok*)
      pkg="$(awk '{print $2}' <<<"$line")"
      for n in "${names[@]}"; do
        if [[ -z $MATCH || $n == *"$MATCH"* ]]; then
          targets+=("$pkg $n")
        fi
      done
      names=()
      ;;
  esac
done <<<"$listing"

if ((${#targets[@]} == 0)); then
  log "no fuzz targets found${MATCH:+ matching $MATCH}"
  exit 1
fi
log "${#targets[@]} fuzz targets, ${SECONDS_EACH}s each (-parallel $PARALLEL)"

failed=()
for t in "${targets[@]}"; do
  read -r pkg name <<<"$t"
  log "$name ($pkg)"
  if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "${SECONDS_EACH}s" -parallel "$PARALLEL" \
    -timeout "$((SECONDS_EACH + 300))s" "$pkg"; then
    failed+=("$name ($pkg)")
  fi
done

if ((${#failed[@]} > 0)); then
  log "FAILED: ${failed[*]}"
  log "the failing inputs are in each package's testdata/fuzz/<Target>/ (see git status)"
  exit 1
fi
log "all ${#targets[@]} fuzz targets passed"
