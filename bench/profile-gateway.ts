// Profiles the gateway under load: writes a .cpuprofile of the gateway process.
//   npx tsx bench/profile-gateway.ts
import { benchFixture, CHAT_BODY } from './lib/bench-fixture.js';
import { maxThroughput } from './lib/load.js';
import { startBundled, startTs } from './lib/processes.js';

const upstream = await startTs('bench/upstream-server.ts');
const fx = await benchFixture(upstream.url);
const gateway = await startBundled('bench/gateway-server.ts', { SVC_DATA_DIR: fx.dataDir, DATABASE_URL: fx.databaseUrl, SVC_MODELS_FILE: '/nonexistent', NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env.PROFILE_DIR ?? '/tmp/svc-prof'}` });
const r = await maxThroughput(gateway.url, { path: '/v1/chat/completions', method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${fx.key}` }, body: CHAT_BODY }, 8);
console.log(r);
gateway.child.kill('SIGINT');
upstream.child.kill('SIGTERM');
