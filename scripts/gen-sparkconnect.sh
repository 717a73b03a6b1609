#!/usr/bin/env bash
# Regenerates internal/sparkconnect/pb from the Spark Connect .proto files inside the
# pyspark wheel's Connect jar (the pinned pyspark of interop/requirements.txt). The output
# is committed: a build needs no protoc. Needs protoc (Debian: protobuf-compiler), unzip,
# and installs protoc-gen-go / protoc-gen-go-grpc from the Go module proxy into a temp dir.
#
#   bash scripts/gen-sparkconnect.sh [path/to/spark-connect_2.13-4.1.1.jar]
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JAR="${1:-}"
if [[ -z $JAR ]]; then
  for j in "${ORCH_CACHE_DIR:-$HOME/.cache/orchestrator}"/interop-venv-*/lib/python3*/site-packages/pyspark/jars/spark-connect_*.jar; do
    [[ -f $j ]] && JAR="$j"
  done
fi
[[ -f $JAR ]] || { echo "no Spark Connect jar found; pass its path" >&2; exit 1; }
command -v protoc >/dev/null || { echo "protoc not found (apt-get install protobuf-compiler)" >&2; exit 1; }
WORK="$(mktemp -d)"
trap 'rm -rf -- "$WORK"' EXIT
GOBIN="$WORK/bin" go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
GOBIN="$WORK/bin" go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
(cd "$WORK" && unzip -q -o "$JAR" 'spark/connect/*.proto')
PKG=github.com/orchestrator-io/orchestrator/internal/sparkconnect/pb
args=()
for f in "$WORK"/spark/connect/*.proto; do
  rel="${f#"$WORK"/}"
  args+=("--go_opt=M$rel=$PKG;pb" "--go-grpc_opt=M$rel=$PKG;pb")
done
mkdir -p "$WORK/out"
(cd "$WORK" && PATH="$WORK/bin:$PATH" protoc -I . --go_out=out --go-grpc_out=out "${args[@]}" spark/connect/*.proto)
rm -f "$REPO_ROOT"/internal/sparkconnect/pb/*.pb.go
cp "$WORK/out/$PKG"/*.go "$REPO_ROOT/internal/sparkconnect/pb/"
echo "generated $(ls "$REPO_ROOT"/internal/sparkconnect/pb/*.go | wc -l) files from $JAR"
