#!/usr/bin/env bash
# Sets up and runs the whole test suite: unit + integration + black-box tests on SQLite,
# the same suite on PostgreSQL, then the browser end-to-end tests. Where PostgreSQL or Redis
# is not reachable on loopback, installs and starts them from Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/lib/node-env.sh
source scripts/lib/apt.sh

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if ! port_open 5432; then
  apt_install postgresql
  cluster=$(ls /etc/postgresql | sort -V | tail -n1)
  pg_ctlcluster --skip-systemctl-redirect "$cluster" main start || pg_ctlcluster "$cluster" main start
  for _ in $(seq 1 30); do port_open 5432 && break; sleep 1; done
  # A fresh Debian cluster asks for passwords on TCP; give the test superuser one.
  su postgres -c "psql -q -c \"ALTER USER postgres PASSWORD 'postgres'\"" >/dev/null
  export TEST_POSTGRES_URL=${TEST_POSTGRES_URL:-postgresql://postgres:postgres@127.0.0.1:5432/postgres}
fi
if ! port_open 6379; then
  apt_install redis-server
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  for _ in $(seq 1 30); do port_open 6379 && break; sleep 1; done
fi
[ -x /usr/bin/chromium ] || apt_install chromium
# ffmpeg and sox cross-check the audio pipeline's files in the tests.
apt_install ffmpeg sox

# Each step's output is kept too, so that what failed is repeated at the end: a CI log's tail
# is often all there is to read.
logs=$(mktemp -d)
steps=0
failed=() # "<log number> <step name>"
step() {
  local name=$1
  shift
  steps=$((steps + 1))
  echo "==> $name"
  if ! "$@" 2>&1 | tee "$logs/$steps.log"; then
    failed+=("$steps $name")
  fi
}

step "type check" npx tsc --noEmit -p .
step "lint" npx eslint .
step "format" npm run --silent format:check
step "tests on SQLite" npx vitest run
step "tests on PostgreSQL" env TEST_DB=postgresql npx vitest run
step "browser end-to-end (e2e/*.e2e.ts; report in e2e/report/)" npx playwright test

if [ ${#failed[@]} -eq 0 ]; then
  echo "==> every step passed"
  exit 0
fi
for entry in "${failed[@]}"; do
  echo "==> FAILED: ${entry#* }"
  plain=$(sed 's/\x1b\[[0-9;]*m//g' "$logs/${entry%% *}.log")
  # Vitest's summary of the failed tests with their errors; otherwise the step's last lines.
  if grep -q 'Failed Tests' <<<"$plain"; then
    grep -E '^ *(FAIL|×) ' <<<"$plain" | head -n 20 || true
    sed -n '/Failed Tests/,$p' <<<"$plain" | head -n 80 || true
  else
    tail -n 40 <<<"$plain"
  fi
done
exit 1
