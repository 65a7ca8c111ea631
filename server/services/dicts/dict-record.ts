// The PronunciationDict record as both edges return it (spec, "PronunciationDict"): snake_case
// fields, ISO 8601 timestamps; an entry has exactly one of alias and phoneme, the other null.
import { ServiceError } from '../errors.ts';

export interface DictEntryRecord {
  grapheme: string;
  alias: string | null;
  phoneme: string | null;
  case_sensitive: boolean;
}

/** A list item: everything but the entries. */
export interface DictSummaryRecord {
  id: string;
  name: string;
  entry_count: number;
  created_at: string;
  updated_at: string;
}

export interface DictRecord extends DictSummaryRecord {
  entries: DictEntryRecord[];
}

const ENTRY_FIELDS = { grapheme: true, alias: true, phoneme: true, caseSensitive: true } as const;

export const DICT_SELECT = {
  id: true,
  name: true,
  createdAt: true,
  updatedAt: true,
  entries: { orderBy: { position: 'asc' }, select: ENTRY_FIELDS },
} as const;

interface DictRow {
  id: string;
  name: string;
  createdAt: Date;
  updatedAt: Date;
  entries: { grapheme: string; alias: string | null; phoneme: string | null; caseSensitive: boolean }[];
}

export function toDictRecord(row: DictRow): DictRecord {
  return {
    id: row.id,
    name: row.name,
    entry_count: row.entries.length,
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
    entries: row.entries.map((e) => ({ grapheme: e.grapheme, alias: e.alias, phoneme: e.phoneme, case_sensitive: e.caseSensitive })),
  };
}

/** The same error for a dictionary that does not exist, is deleted, or is another org's. */
export function dictNotFound(id: string, param?: string): ServiceError {
  const shown = id.length > 100 ? `${id.slice(0, 100)}…` : id;
  return new ServiceError('dict_not_found', `No pronunciation dictionary with id '${shown}' in this organization.`, param);
}
