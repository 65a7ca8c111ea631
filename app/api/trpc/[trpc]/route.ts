import { createHttpContext } from '@/server/api/context';
import { handleTrpcRequest } from '@/server/api/trpc-http';

const handler = (req: Request) =>
  handleTrpcRequest(
    req,
    () => createHttpContext(req),
    ({ error, path }) => {
      if (error.code === 'INTERNAL_SERVER_ERROR') console.error(`tRPC ${path ?? '?'} failed:`, error.cause ?? error);
    },
  );

export { handler as GET, handler as POST };
