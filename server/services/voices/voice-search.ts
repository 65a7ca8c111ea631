// Voices are searched and filtered in the database on both providers. Json columns cannot be
// matched portably, so each voice keeps two derived lowercase strings, written by every
// service that changes name, description or tags (and only here).

export const MAX_TAGS = 20;
export const MAX_TAG_LENGTH = 40;

/** Lowercase, trimmed, unique, in order; "|" is the index delimiter and cannot be in a tag. */
export function normalizeTags(tags: readonly string[]): string[] {
  const seen = new Set<string>();
  for (const raw of tags) {
    const tag = raw.trim().toLowerCase().replace(/\|/g, '');
    if (tag) seen.add(tag);
  }
  return [...seen];
}

export function voiceSearchFields(voice: { name: string; description: string; tags: readonly string[] }): { searchText: string; tagIndex: string } {
  const tags = normalizeTags(voice.tags);
  return {
    searchText: [voice.name, voice.description, ...tags].join('\n').toLowerCase(),
    tagIndex: tags.length ? `|${tags.join('|')}|` : '',
  };
}
