// A Chrome DevTools Protocol session with a child process's inspector, for the profiling
// scripts: the process is started with --inspect=127.0.0.1:0 and its port is found among the
// sockets it listens on.
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import WebSocket from 'ws';

export interface InspectorSession {
  call<T = unknown>(method: string, params?: object): Promise<T>;
  /** Protocol events (e.g. HeapProfiler.addHeapSnapshotChunk). */
  on(event: string, listener: (params: any) => void): void;
  close(): void;
}

export async function attachInspector(pid: number): Promise<InspectorSession> {
  const ws = new WebSocket(await debuggerUrl(pid));
  await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
  let id = 0;
  const pending = new Map<number, { resolve: (result: unknown) => void; reject: (e: Error) => void }>();
  const listeners = new Map<string, (params: any) => void>();
  ws.on('message', (data) => {
    const msg = JSON.parse(String(data)) as { id?: number; method?: string; params?: unknown; result?: unknown; error?: { message: string } };
    if (msg.method) listeners.get(msg.method)?.(msg.params);
    const p = msg.id === undefined ? undefined : pending.get(msg.id);
    if (!p) return;
    pending.delete(msg.id!);
    if (msg.error) p.reject(new Error(msg.error.message));
    else p.resolve(msg.result);
  });
  return {
    call: <T>(method: string, params: object = {}) =>
      new Promise<T>((resolve, reject) => {
        pending.set(++id, { resolve: resolve as (r: unknown) => void, reject });
        ws.send(JSON.stringify({ id, method, params }));
      }),
    on: (event, listener) => listeners.set(event, listener),
    close: () => ws.close(),
  };
}

async function debuggerUrl(pid: number): Promise<string> {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const inode = /socket:\[(\d+)\]/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // closed meanwhile
    }
  }
  const listening = readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f[3] === '0A' && inodes.has(f[9]!))
    .map((f) => parseInt(f[1]!.split(':')[1]!, 16));
  for (const port of listening) {
    try {
      const list = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as { webSocketDebuggerUrl?: string }[];
      if (list[0]?.webSocketDebuggerUrl) return list[0].webSocketDebuggerUrl;
    } catch {
      // not the inspector's port
    }
  }
  throw new Error(`no inspector found in process ${pid} (start it with --inspect=127.0.0.1:0)`);
}
