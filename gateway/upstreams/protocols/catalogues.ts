// The protocols whose engines list their own voices (voice_catalogue), on their own: the
// dashboard's voice import loads only these, not the engines the gateway runs in process.
import type { ProtocolDefinition } from '../contract.ts';
import { cartesia } from './cartesia/index.ts';
import { deepgram } from './deepgram.ts';
import { elevenlabs } from './elevenlabs.ts';

export const CATALOGUE_PROTOCOLS: readonly ProtocolDefinition[] = [cartesia, deepgram, elevenlabs];
