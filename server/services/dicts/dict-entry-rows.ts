import { newId } from '../../db/ids.ts';
import type { DictEntryInput } from './dict-input.ts';

/** Entry rows in the order given: position is the index, which is the order TTS reads them in. */
export function entryRows(dictId: string, entries: readonly DictEntryInput[]) {
  return entries.map((e, position) => ({
    id: newId('pent'),
    dictId,
    position,
    grapheme: e.grapheme,
    alias: e.alias ?? null,
    phoneme: e.phoneme ?? null,
    caseSensitive: e.case_sensitive,
  }));
}
