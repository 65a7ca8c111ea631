// The dashboard offers "Import the engine's voices" only for models whose upstream protocol lists
// voices; it reads which from VOICE_CATALOGUE_PROTOCOLS, since it cannot load the protocols.
import { describe, expect, it } from 'vitest';
import { VOICE_CATALOGUE_PROTOCOLS } from '../../server/services/voices/engine-voices.ts';
import { offers } from '../upstreams/contract.ts';
import { PROTOCOLS } from '../upstreams/protocols/index.ts';

describe('VOICE_CATALOGUE_PROTOCOLS', () => {
  it('names exactly the protocols that offer voice_catalogue', () => {
    const listing = PROTOCOLS.filter((p) => offers(p, 'voice_catalogue')).map((p) => p.name);
    expect([...VOICE_CATALOGUE_PROTOCOLS].sort()).toEqual(listing.sort());
    // The bundled engines list none: the page never offers them an import that fails.
    expect(listing).not.toContain('flite');
    expect(listing).not.toContain('espeak-ng');
  });
});
