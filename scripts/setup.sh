#!/usr/bin/env bash
# Sets everything up on a fresh Debian/Ubuntu clone: pinned Node, system packages, npm
# packages, generated Prisma clients, database migrations, the dashboard build.
# Idempotent: a second run only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/node-env.sh
source scripts/lib/apt.sh

# The local speech engines (Debian main): flite and espeak-ng speak, pocketsphinx listens.
apt_install flite espeak-ng pocketsphinx pocketsphinx-en-us libpocketsphinx3

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
