import { accountRouter } from './routers/account.js';
import { authRouter } from './routers/auth.js';
import { claimsRouter } from './routers/claims.js';
import { creditsRouter } from './routers/credits.js';
import { dictsRouter } from './routers/dicts.js';
import { keysRouter } from './routers/keys.js';
import { modelsRouter } from './routers/models.js';
import { orgsRouter } from './routers/orgs.js';
import { usageRouter } from './routers/usage.js';
import { voicesRouter } from './routers/voices.js';
import { createCallerFactory, createTRPCRouter } from './trpc.js';

export const appRouter = createTRPCRouter({
  auth: authRouter,
  account: accountRouter,
  keys: keysRouter,
  credits: creditsRouter,
  usage: usageRouter,
  voices: voicesRouter,
  models: modelsRouter,
  dicts: dictsRouter,
  claims: claimsRouter,
  orgs: orgsRouter,
});

export type AppRouter = typeof appRouter;

export const createCaller = createCallerFactory(appRouter);
