// The realtime profiles file (config/realtime-profiles.json, or SVC_REALTIME_PROFILES_FILE): read
// by the gateway (gateway/realtime/profiles.ts composes sessions from it) and by the dashboard's
// Talk page (server/api/routers/talk.ts lists it), so both see the same profiles.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { PROJECT_ROOT } from '../project-root.ts';

export interface RealtimeProfile {
  id: string;
  /** Each: a model id of the registry, or undefined for the default. */
  stt?: string;
  llm: string;
  tts?: string;
  voice?: string;
  instructions?: string;
  /** Sessions start with preemptive answers on (session.update `svc_preemptive_answers` changes it). */
  preemptive?: boolean;
}

const ProfilesFile = z.object({
  profiles: z.array(
    z.object({
      id: z.string().min(1),
      stt: z.string().min(1).optional(),
      llm: z.string().min(1),
      tts: z.string().min(1).optional(),
      voice: z.string().min(1).optional(),
      instructions: z.string().optional(),
      preemptive: z.boolean().optional(),
    }),
  ),
});

export const DEFAULT_PROFILES_FILE = join(PROJECT_ROOT, 'config/realtime-profiles.json');

/** The profiles of `file`; none when it does not exist. A file that does not parse is an error at start, not at the first session. */
export function loadRealtimeProfiles(file = DEFAULT_PROFILES_FILE): Map<string, RealtimeProfile> {
  let text: string;
  try {
    // The file is the operator's (SVC_REALTIME_PROFILES_FILE): not one for Next's tracer to bundle.
    text = readFileSync(/*turbopackIgnore: true*/ file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return new Map();
    throw e;
  }
  const parsed = ProfilesFile.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${file}: ${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`);
  return new Map(parsed.data.profiles.map((p) => [p.id, p]));
}
