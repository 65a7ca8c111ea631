// Set up before every file of the unit project (`*.unit.test.ts`, vitest.config.ts): a unit test starts nothing.
// Starting a process, listening on a socket or opening a connection (a database, Redis, an
// engine, a server of the test's own) throws, naming the rule, instead of quietly making the
// unit run slow and machine-dependent.
import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import net from 'node:net';

const refuse = (what: string) => () => {
  throw new Error(`A unit test may not ${what}: move the file to the integration project (name it '*.test.ts', not '*.unit.test.ts').`);
};

const mutableChildProcess = childProcess as unknown as Record<string, unknown>;
for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork']) {
  mutableChildProcess[name] = refuse(`start a process (child_process.${name})`);
}
net.Server.prototype.listen = refuse('listen on a socket') as typeof net.Server.prototype.listen;
net.Socket.prototype.connect = refuse('open a connection') as typeof net.Socket.prototype.connect;
// Named imports of node:child_process see the replacements too.
syncBuiltinESMExports();
