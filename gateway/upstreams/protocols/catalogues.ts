// The protocols whose engines list their own voices (voice_catalogue), on their own: the
// dashboard's voice import loads only these, not the engines the gateway runs in process.
import type { ProtocolDefinition } from '../contract.js';
import { cartesia } from './cartesia/index.js';
import { deepgram } from './deepgram.js';
import { elevenlabs } from './elevenlabs.js';

export const CATALOGUE_PROTOCOLS: readonly ProtocolDefinition[] = [cartesia, deepgram, elevenlabs];
