import { accountRouter } from './routers/account.ts';
import { authRouter } from './routers/auth.ts';
import { claimsRouter } from './routers/claims.ts';
import { creditsRouter } from './routers/credits.ts';
import { dictsRouter } from './routers/dicts.ts';
import { keysRouter } from './routers/keys.ts';
import { logsRouter } from './routers/logs.ts';
import { modelsRouter } from './routers/models.ts';
import { orgsRouter } from './routers/orgs.ts';
import { phoneRouter } from './routers/phone.ts';
import { playgroundRouter } from './routers/playground.ts';
import { talkRouter } from './routers/talk.ts';
import { usageRouter } from './routers/usage.ts';
import { voicesRouter } from './routers/voices.ts';
import { createCallerFactory, createTRPCRouter } from './trpc.ts';

export const appRouter = createTRPCRouter({
  auth: authRouter,
  account: accountRouter,
  keys: keysRouter,
  credits: creditsRouter,
  usage: usageRouter,
  logs: logsRouter,
  voices: voicesRouter,
  models: modelsRouter,
  dicts: dictsRouter,
  claims: claimsRouter,
  orgs: orgsRouter,
  phone: phoneRouter,
  talk: talkRouter,
  playground: playgroundRouter,
});

export type AppRouter = typeof appRouter;

export const createCaller = createCallerFactory(appRouter);
