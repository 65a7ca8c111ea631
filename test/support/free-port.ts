// A loopback port for a child process to listen on. Ports from the kernel's ephemeral range
// (what `listen(0)` hands out) are also the source ports of every outgoing connection, so one
// found free there can be taken by a client socket between the check and the child's bind; the
// ports picked here lie below that range, where only another listener can take them.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const LOWEST = 15_000;

/** The first port of the kernel's ephemeral range (Linux; 32768 elsewhere, its default). */
function ephemeralStart(): number {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > LOWEST + 1_000 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

const HIGHEST = ephemeralStart() - 1;

function listensOn(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * (HIGHEST - LOWEST + 1));
    if (await listensOn(port)) return port;
  }
  throw new Error(`no free port between ${LOWEST} and ${HIGHEST} in 50 tries`);
}
