import { fetchRequestHandler } from '@trpc/server/adapters/fetch';
import { createHttpContext } from '@/server/api/context';
import { appRouter } from '@/server/api/root';

const handler = (req: Request) =>
  fetchRequestHandler({
    endpoint: '/api/trpc',
    req,
    router: appRouter,
    createContext: () => createHttpContext(req),
    onError({ error, path }) {
      if (error.code === 'INTERNAL_SERVER_ERROR') console.error(`tRPC ${path ?? '?'} failed:`, error.cause ?? error);
    },
  });

export { handler as GET, handler as POST };
