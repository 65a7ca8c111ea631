import { z } from 'zod';
import { loadConfig } from '../../config/env.ts';
import { signUp } from '../../services/users/sign-up.ts';
import { createTRPCRouter, credentialThrottleOf, mailerOf, publicProcedure } from '../trpc.ts';

export const authRouter = createTRPCRouter({
  /**
   * Creates the account, its personal org and owner membership; the browser then signs in.
   * Throttled per address and per email before the password is hashed. With mail configured,
   * a verification link is sent (`verificationEmail`: sent or failed; off without mail).
   */
  signUp: publicProcedure
    .input(
      z.object({
        email: z.string().max(254, 'Email is too long.'),
        password: z.string().max(200, 'Password is too long.'),
        name: z.string().max(100, 'Name must be at most 100 characters.').optional(),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      await credentialThrottleOf(ctx).take('sign_up', { address: ctx.clientIp ?? null, email: input.email });
      const mailer = mailerOf(ctx);
      const user = await signUp(ctx.db, input, { mail: mailer ? { mailer, dashboardUrl: loadConfig().dashboardUrl } : null });
      return { email: user.email, verificationEmail: user.verificationEmail };
    }),
});
