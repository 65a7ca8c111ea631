import { z } from 'zod';
import { signUp } from '../../services/users/sign-up.js';
import { createTRPCRouter, publicProcedure } from '../trpc.js';

export const authRouter = createTRPCRouter({
  /** Creates the account, its personal org and owner membership; the browser then signs in. */
  signUp: publicProcedure
    .input(
      z.object({
        email: z.string().max(254, 'Email is too long.'),
        password: z.string().max(200, 'Password is too long.'),
        name: z.string().max(100, 'Name must be at most 100 characters.').optional(),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      const user = await signUp(ctx.db, input);
      return { email: user.email };
    }),
});
