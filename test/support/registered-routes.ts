import type { FastifyInstance } from 'fastify';

/** The routes Fastify registered, from its route tree (printRoutes without common prefixes: one path piece per line). */
export function registeredRoutes(app: FastifyInstance): { method: string; path: string }[] {
  const stack: string[] = [];
  const routes: { method: string; path: string }[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const m = /^([│ ]*)[├└]── (\S+)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    stack.length = depth;
    stack.push(m[2]!);
    for (const method of (m[3] ?? '').split(', ').filter(Boolean)) routes.push({ method, path: stack.join('') });
  }
  return routes;
}
