// The engine spawner: a small helper process that starts speech engines for the gateway.
// Starting a child from the gateway itself forks the gateway's whole address space on its
// event loop (~10 ms at 230 MB, far more with STT decoders loaded), freezing every stream
// meanwhile; from this small process a spawn is cheap and blocks nobody else.
// Protocol (IPC, advanced serialization): {id, command, args, input?} starts a run;
// {id, kill: true} kills it. Replies: {id, data: Buffer} for stdout, then
// {id, exit: {code, signal, stderr, error?}}.
import { spawn } from 'node:child_process';

const runs = new Map();

process.on('message', (msg) => {
  if (msg.kill) {
    runs.get(msg.id)?.kill('SIGKILL');
    return;
  }
  const { id, command, args, input } = msg;
  let child;
  try {
    child = spawn(command, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
  } catch (e) {
    process.send({ id, exit: { code: null, signal: null, stderr: '', error: { code: e.code, message: e.message } } });
    return;
  }
  runs.set(id, child);
  let stderr = '';
  let error = null;
  child.stdout.on('data', (data) => process.send({ id, data }));
  child.stderr.on('data', (d) => {
    if (stderr.length < 2000) stderr += d.toString();
  });
  child.on('error', (e) => {
    error = { code: e.code, message: e.message };
  });
  child.stdin?.on('error', () => {});
  if (input !== undefined) child.stdin.end(input);
  child.on('close', (code, signal) => {
    runs.delete(id);
    process.send({ id, exit: { code, signal, stderr, error } });
  });
});

// The gateway went away: take the engines with us.
process.on('disconnect', () => {
  for (const child of runs.values()) child.kill('SIGKILL');
  process.exit(0);
});
