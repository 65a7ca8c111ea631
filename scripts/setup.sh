#!/usr/bin/env bash
# Sets everything up on a fresh Debian/Ubuntu clone: pinned Node, system packages, npm
# packages, generated Prisma clients, database migrations, the dashboard build.
# Idempotent: a second run only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/node-env.sh
source scripts/lib/apt.sh

# Nothing in the foundation needs system packages beyond what npm brings; the engines add theirs here.
SVC_APT_PACKAGES=${SVC_APT_PACKAGES:-}
[ -n "$SVC_APT_PACKAGES" ] && apt_install $SVC_APT_PACKAGES

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "==> npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi
echo "==> prisma generate"
npx tsx scripts/prisma-generate.ts
echo "==> migrate"
node bin/svc.mjs migrate
if [ "${SVC_SKIP_BUILD:-0}" != "1" ]; then
  echo "==> next build"
  npx next build >/dev/null
fi
echo "==> setup done"
