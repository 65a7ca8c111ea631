import { z } from 'zod';

export const realtimeSettings = z
  .object({
    /** Which server's events: see dialects.ts. */
    dialect: z.enum(['ga', 'beta', 'speaches', 'vllm']).default('ga'),
    /** Adds `?model=<upstream model>` to the socket URL (LocalAI picks its pipeline from it; OpenAI GA must not get it). */
    model_in_url: z.boolean().default(false),
    /** Server VAD: speech probability threshold. */
    vad_threshold: z.number().min(0).max(1).default(0.5),
    /** Server VAD: silence that ends a turn. */
    silence_duration_ms: z.number().int().min(0).max(10_000).default(500),
    /** Server VAD: audio kept before detected speech. */
    prefix_padding_ms: z.number().int().min(0).max(10_000).default(300),
    /** Guides the transcription model; the session's key terms are appended to it. */
    prompt: z.string().max(4000).optional(),
  })
  .strict();

export type RealtimeSettings = z.infer<typeof realtimeSettings>;
