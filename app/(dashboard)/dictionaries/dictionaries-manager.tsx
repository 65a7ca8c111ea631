'use client';
// Pronunciation dictionaries: list, create, delete (with confirmation), and an entry table that
// is edited locally and saved as a whole (the API's PATCH replaces all entries). Input is checked
// in the browser with the very schema the gateway and the tRPC router use (dict-input.ts), so a
// mistake is pointed at in its cell before anything is sent; the server checks again. Each
// saved entry can be heard (hear-entry.tsx).
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useId, useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Button } from '@/app/_components/button';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { ConfirmDialog } from '@/app/_components/confirm-dialog';
import { CopyButton } from '@/app/_components/copy-button';
import { LoadingBlock, Spinner } from '@/app/_components/spinner';
import { TextField } from '@/app/_components/text-field';
import type { RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, formatDateTime } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import { MAX_DICT_NAME, MAX_ENTRIES_PER_DICT, parseCreateDict, parseUpdateDict, type DictEntryInput } from '@/server/services/dicts/dict-input';
import { isServiceError } from '@/server/services/errors';
import { HearResult, HearSettings, useHearing, type Hearing } from './hear-entry';

type DictSummary = RouterOutputs['dicts']['list'][number];
type DictFull = RouterOutputs['dicts']['get'];

/** A row of the entry table as edited; `key` keeps React's identity across inserts and removals. */
interface Row {
  key: number;
  grapheme: string;
  kind: 'alias' | 'phoneme';
  value: string;
  caseSensitive: boolean;
}

type Field = 'grapheme' | 'kind' | 'value' | 'caseSensitive';

/** A validation failure: the field it names (`name`, `entries[3].alias`...) and what is wrong. */
interface FieldError {
  param: string | null;
  message: string;
}

const PARAM_PREFIX = /^((?:name|entries)(?:\[\d+\])?(?:\.[a-z_]+)?): /;

/** The same failure whether it was found here (ServiceError) or by the server (tRPC error whose message starts with the param). */
function fieldErrorOf(error: unknown): FieldError {
  if (isServiceError(error)) return { param: error.param, message: error.message };
  const message = errorMessage(error);
  return { param: PARAM_PREFIX.exec(message)?.[1] ?? null, message };
}

export function DictionariesManager() {
  const [selectedId, setSelectedId] = useState<string | null>(null);
  const [dirty, setDirty] = useState(false);
  const select = (id: string | null) => {
    if (id === selectedId) return;
    if (dirty && !window.confirm('Discard your unsaved changes to this dictionary?')) return;
    setDirty(false);
    setSelectedId(id);
  };
  return (
    <>
      <PageHeader
        title="Pronunciation dictionaries"
        description={
          <>
            Tell the voices how to say names, brands and abbreviations. Pass a dictionary&apos;s id as{' '}
            <code className="font-mono text-xs">pronunciation_dict_id</code> in a TTS request.
          </>
        }
      />
      <div className="space-y-6">
        <CreateDict onCreated={(id) => select(id)} />
        <DictList
          selectedId={selectedId}
          onEdit={select}
          onDeleted={(id) => {
            if (id !== selectedId) return;
            setDirty(false);
            setSelectedId(null);
          }}
        />
        {selectedId && <DictEditor key={selectedId} id={selectedId} onDirtyChange={setDirty} onClose={() => select(null)} />}
      </div>
    </>
  );
}

function CreateDict({ onCreated }: { onCreated: (id: string) => void }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const formRef = useRef<HTMLFormElement>(null);
  const [error, setError] = useState<string | null>(null);
  const create = useMutation(
    trpc.dicts.create.mutationOptions({
      onSuccess: (dict) => {
        formRef.current?.reset();
        queryClient.setQueryData(trpc.dicts.get.queryKey({ id: dict.id }), dict);
        void queryClient.invalidateQueries({ queryKey: trpc.dicts.list.queryKey() });
        onCreated(dict.id);
      },
      onError: (e) => setError(errorMessage(e)),
    }),
  );
  return (
    <Card title="Create a dictionary" description="Start with a name; add entries in the table that opens below.">
      <form
        ref={formRef}
        noValidate
        className="flex flex-col gap-3 sm:flex-row sm:items-start"
        onSubmit={(event) => {
          event.preventDefault();
          const name = String(new FormData(event.currentTarget).get('name') ?? '');
          try {
            setError(null);
            create.mutate(parseCreateDict({ name, entries: [] }));
          } catch (e) {
            setError(fieldErrorOf(e).message.replace(/^name: /, 'Name '));
          }
        }}
      >
        <TextField label="Dictionary name" name="name" maxLength={MAX_DICT_NAME} placeholder="e.g. Product names" error={error} className="flex-1" />
        <Button type="submit" pending={create.isPending} className="sm:mt-6">
          Create dictionary
        </Button>
      </form>
    </Card>
  );
}

function DictList({ selectedId, onEdit, onDeleted }: { selectedId: string | null; onEdit: (id: string) => void; onDeleted: (id: string) => void }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const dicts = useQuery(trpc.dicts.list.queryOptions());
  const [target, setTarget] = useState<DictSummary | null>(null);
  const remove = useMutation(
    trpc.dicts.delete.mutationOptions({
      onSuccess: ({ id }) => {
        setTarget(null);
        onDeleted(id);
        queryClient.removeQueries({ queryKey: trpc.dicts.get.queryKey({ id }) });
        void queryClient.invalidateQueries({ queryKey: trpc.dicts.list.queryKey() });
      },
    }),
  );

  return (
    <Card title="Your dictionaries">
      {dicts.isPending ? (
        <LoadingBlock label="Loading dictionaries" />
      ) : dicts.isError ? (
        <Alert title="Could not load your dictionaries" onRetry={() => void dicts.refetch()}>
          {errorMessage(dicts.error)}
        </Alert>
      ) : dicts.data.length === 0 ? (
        <EmptyState title="No dictionaries yet">Create one above, then add the words it should change.</EmptyState>
      ) : (
        <ul className="divide-y divide-zinc-100" aria-label="Pronunciation dictionaries">
          {dicts.data.map((d) => (
            <li
              key={d.id}
              data-testid="dict-row"
              data-dict-id={d.id}
              className={`flex flex-wrap items-center gap-x-4 gap-y-2 py-3 ${d.id === selectedId ? 'bg-indigo-50/60 -mx-2 px-2 rounded' : ''}`}
            >
              <div className="min-w-0 flex-1">
                <p className="truncate font-medium text-zinc-900" title={d.name}>
                  {d.name}
                </p>
                <p className="text-sm text-zinc-600">
                  <span data-testid="dict-entry-count">
                    {d.entry_count.toLocaleString('en')} {d.entry_count === 1 ? 'entry' : 'entries'}
                  </span>
                  {' · '}created {formatDateTime(d.created_at)}
                  <span className="block truncate font-mono text-xs text-zinc-500 sm:inline sm:before:content-['_·_']">{d.id}</span>
                </p>
              </div>
              <div className="flex gap-2">
                <Button
                  variant="secondary"
                  className="min-h-8 px-3 py-1"
                  onClick={() => onEdit(d.id)}
                  aria-label={`Edit dictionary ${d.name}`}
                  aria-pressed={d.id === selectedId}
                >
                  Edit
                </Button>
                <Button
                  variant="secondary"
                  className="min-h-8 px-3 py-1"
                  onClick={() => {
                    remove.reset();
                    setTarget(d);
                  }}
                  aria-label={`Delete dictionary ${d.name}`}
                >
                  Delete
                </Button>
              </div>
            </li>
          ))}
        </ul>
      )}
      <ConfirmDialog
        open={target !== null}
        title="Delete this dictionary?"
        confirmLabel="Delete dictionary"
        pending={remove.isPending}
        error={remove.error ? errorMessage(remove.error) : null}
        onCancel={() => setTarget(null)}
        onConfirm={() => target && remove.mutate({ id: target.id })}
      >
        <p>
          <span className="font-semibold">{target?.name}</span> and its {target?.entry_count.toLocaleString('en')} entries will be deleted. TTS requests that
          name it will fail with <code className="font-mono text-xs">dict_not_found</code> from then on.
        </p>
      </ConfirmDialog>
    </Card>
  );
}

function DictEditor({ id, onClose, onDirtyChange }: { id: string; onClose: () => void; onDirtyChange: (dirty: boolean) => void }) {
  const trpc = useTRPC();
  const dict = useQuery(trpc.dicts.get.queryOptions({ id }));
  const hearing = useHearing(id);
  const heading = useRef<HTMLHeadingElement>(null);
  // Lives here, not in the form: the form is re-mounted after a save, and a live region that
  // appears with its text already in it is not read out.
  const [status, setStatus] = useState('');
  useEffect(() => {
    heading.current?.scrollIntoView({ block: 'nearest', behavior: 'smooth' });
  }, []);

  return (
    <section aria-labelledby="dict-editor-title" className="rounded-lg border border-zinc-200 bg-white shadow-xs" data-testid="dict-editor">
      <header className="flex flex-wrap items-start justify-between gap-3 border-b border-zinc-100 px-4 py-4 sm:px-6">
        <div className="min-w-0 flex-1">
          <h2 id="dict-editor-title" ref={heading} tabIndex={-1} className="truncate text-base font-semibold text-zinc-900">
            {dict.data ? `Edit “${dict.data.name}”` : 'Edit dictionary'}
          </h2>
          <p className="mt-1 text-sm text-zinc-600">
            An <strong>alias</strong> replaces the word with other text, for every voice. <strong>Phonemes</strong> are eSpeak NG mnemonics (e.g.{' '}
            <code className="font-mono text-xs">h@l&apos;oU</code>), used by eSpeak voices; other voices say the word as written. Whole words only; case is
            ignored unless the entry is case-sensitive.
          </p>
        </div>
        <div className="flex shrink-0 gap-2">
          <CopyButton value={id} label="Copy id" />
          <Button variant="ghost" onClick={onClose}>
            Close
          </Button>
        </div>
      </header>
      <div className="px-4 py-4 sm:px-6">
        {dict.isPending ? (
          <LoadingBlock label="Loading entries" lines={4} />
        ) : dict.isError ? (
          <Alert title="Could not load this dictionary" onRetry={() => void dict.refetch()}>
            {errorMessage(dict.error)}
          </Alert>
        ) : (
          <div className="space-y-4">
            <HearSettings hearing={hearing} />
            {/* Re-mounted with the server's copy after each save (updated_at changes). */}
            <EntryForm
              key={dict.data.updated_at}
              dict={dict.data}
              hearing={hearing}
              onDirtyChange={onDirtyChange}
              onStatus={setStatus}
              onSaved={() => {
                setStatus('Saved.');
                heading.current?.focus();
              }}
            />
          </div>
        )}
        <p role="status" aria-live="polite" className="mt-2 min-h-5 text-sm text-zinc-600" data-testid="dict-editor-status">
          {status}
        </p>
      </div>
    </section>
  );
}

let rowKeys = 0;
const toRow = (e: DictFull['entries'][number]): Row => ({
  key: ++rowKeys,
  grapheme: e.grapheme,
  kind: e.phoneme !== null ? 'phoneme' : 'alias',
  value: e.phoneme ?? e.alias ?? '',
  caseSensitive: e.case_sensitive,
});
const blankRow = (): Row => ({ key: ++rowKeys, grapheme: '', kind: 'alias', value: '', caseSensitive: false });
/** What an entry says, to tell a row that is exactly a saved entry (and can be heard as it is) from an edited one. */
const rowSignature = (r: Pick<Row, 'grapheme' | 'kind' | 'value' | 'caseSensitive'>) => JSON.stringify([r.grapheme, r.kind, r.value, r.caseSensitive]);

/** The rows as API entries, leaving out rows where nothing was typed; rowOf maps an entry index back to its row. */
function toEntries(rows: Row[]): { entries: DictEntryInput[]; rowOf: number[] } {
  const entries: DictEntryInput[] = [];
  const rowOf: number[] = [];
  rows.forEach((r, i) => {
    if (r.grapheme.trim() === '' && r.value.trim() === '') return;
    entries.push({
      grapheme: r.grapheme,
      alias: r.kind === 'alias' ? r.value : null,
      phoneme: r.kind === 'phoneme' ? r.value : null,
      case_sensitive: r.caseSensitive,
    });
    rowOf.push(i);
  });
  return { entries, rowOf };
}

const FIELD_OF: Record<string, Field> = { grapheme: 'grapheme', alias: 'value', phoneme: 'value', case_sensitive: 'caseSensitive' };
/** The column a field is in, as the table heads it ("Say as" or "Phonemes" by the row's type). */
const fieldLabel = (field: Field, row: Row | undefined) =>
  field === 'value' ? (row?.kind === 'phoneme' ? 'Phonemes' : 'Say as') : { grapheme: 'Word', kind: 'Type', caseSensitive: 'Case-sensitive' }[field];

/**
 * The schema's words for API clients (dict-input.ts: graphemes, aliases, 0-based entries[i])
 * in the table's words: entries numbered as the rows are, from 1, and the columns' names.
 */
function tableWords(message: string, rowOf: number[]): string {
  return message
    .replace(/same grapheme as entries\[(\d+)\]/, (_m, i: string) => `the same word as entry ${(rowOf[Number(i)] ?? Number(i)) + 1}`)
    .replace('graphemes are compared ignoring case', 'words are compared ignoring case')
    .replace('give either alias or phoneme, not both', 'give either text to say or phonemes, not both')
    .replace('give an alias (replacement text) or a phoneme', 'give the text to say (or phonemes)');
}

function EntryForm({
  dict,
  hearing,
  onDirtyChange,
  onStatus,
  onSaved,
}: {
  dict: DictFull;
  hearing: Hearing;
  onDirtyChange: (dirty: boolean) => void;
  onStatus: (message: string) => void;
  onSaved: () => void;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const idPrefix = useId();
  const form = useRef<HTMLFormElement>(null);
  const [name, setName] = useState(dict.name);
  const [rows, setRows] = useState<Row[]>(() => dict.entries.map(toRow));
  const [dirty, setDirty] = useState(false);
  const [error, setError] = useState<{ row: number | null; field: Field | 'name' | null; message: string } | null>(null);
  // What to focus once React has rendered the change that created it.
  const [focusTarget, setFocusTarget] = useState<string | null>(null);
  const rowOfRef = useRef<number[]>([]);
  const cellId = (row: Row, field: Field) => `${idPrefix}-${row.key}-${field}`;

  useEffect(() => onDirtyChange(dirty), [dirty, onDirtyChange]);
  useEffect(() => {
    if (!focusTarget) return;
    const el = form.current?.querySelector<HTMLElement>(`[id="${CSS.escape(focusTarget)}"]`);
    el?.focus();
    setFocusTarget(null);
  }, [focusTarget]);

  const save = useMutation(
    trpc.dicts.update.mutationOptions({
      onSuccess: (saved) => {
        queryClient.setQueryData(trpc.dicts.get.queryKey({ id: saved.id }), saved);
        void queryClient.invalidateQueries({ queryKey: trpc.dicts.list.queryKey() });
        onDirtyChange(false);
        onSaved();
      },
      onError: (e) => showError(fieldErrorOf(e), rowOfRef.current),
    }),
  );

  function showError(e: FieldError, rowOf: number[]) {
    const m = /^entries\[(\d+)\](?:\.([a-z_]+))?$/.exec(e.param ?? '');
    const rest = e.param ? e.message.slice(e.param.length + 2) : e.message;
    if (m) {
      const row = rowOf[Number(m[1])] ?? null;
      const field = FIELD_OF[m[2] ?? 'grapheme'] ?? 'grapheme';
      setError({
        row,
        field,
        message: `Entry ${row === null ? '?' : row + 1}, ${fieldLabel(field, row === null ? undefined : rows[row])}: ${tableWords(rest, rowOf)}.`,
      });
      if (row !== null && rows[row]) setFocusTarget(cellId(rows[row]!, field));
    } else if (e.param === 'name') {
      setError({ row: null, field: 'name', message: `Name ${rest}.` });
      setFocusTarget(`${idPrefix}-name`);
    } else {
      setError({ row: null, field: null, message: e.param === 'entries' ? `Entries: ${tableWords(rest, rowOf)}.` : e.message });
    }
  }

  const change = (update: () => void) => {
    update();
    if (!dirty) onStatus('Unsaved changes.');
    setDirty(true);
  };
  const setRow = (index: number, patch: Partial<Row>) => change(() => setRows((rs) => rs.map((r, i) => (i === index ? { ...r, ...patch } : r))));
  const addRow = () => {
    const row = blankRow();
    change(() => setRows((rs) => [...rs, row]));
    setFocusTarget(cellId(row, 'grapheme'));
  };
  const removeRow = (index: number) => {
    const next = rows[index + 1] ?? rows[index - 1];
    change(() => setRows((rs) => rs.filter((_, i) => i !== index)));
    setError(null); // its row number may have shifted
    onStatus(`Entry ${index + 1} removed. Unsaved changes.`);
    setFocusTarget(next ? `${idPrefix}-${next.key}-remove` : `${idPrefix}-add`);
  };
  const discard = () => {
    setName(dict.name);
    setRows(dict.entries.map(toRow));
    setDirty(false);
    setError(null);
    onStatus('Changes discarded.');
  };

  const onSubmit = (event: React.FormEvent) => {
    event.preventDefault();
    setError(null);
    const { entries, rowOf } = toEntries(rows);
    rowOfRef.current = rowOf;
    let update;
    try {
      update = parseUpdateDict({ name, entries });
    } catch (e) {
      showError(fieldErrorOf(e), rowOf);
      return;
    }
    save.mutate({ id: dict.id, ...update });
  };

  const full = rows.length >= MAX_ENTRIES_PER_DICT;
  const invalid = (row: number, field: Field) => error?.row === row && error.field === field;
  const grid = 'md:grid-cols-[minmax(0,1fr)_9.5rem_minmax(0,1.4fr)_7.5rem_9rem]';
  // The gateway speaks with the dictionary as saved: only a row that is exactly a saved entry
  // would sound as it reads, so new and edited rows wait for Save (and say so).
  const savedSignatures = new Set(dict.entries.map((e) => rowSignature(toRow(e))));
  const isSaved = (row: Row) => savedSignatures.has(rowSignature(row));
  const unsavedNoteId = `${idPrefix}-hear-unsaved`;
  const anyUnsaved = rows.some((r) => !isSaved(r));

  return (
    <form ref={form} noValidate onSubmit={onSubmit} aria-label={`Entries of ${dict.name}`} className="space-y-4">
      <TextField
        id={`${idPrefix}-name`}
        label="Name"
        value={name}
        maxLength={MAX_DICT_NAME}
        onChange={(e) => change(() => setName(e.target.value))}
        error={error?.field === 'name' ? error.message : null}
        className="max-w-md"
      />

      <div>
        <div className="flex flex-wrap items-baseline justify-between gap-2">
          <h3 className="text-sm font-semibold text-zinc-900">Entries</h3>
          <p className="text-xs text-zinc-500" data-testid="entry-counter">
            {rows.length.toLocaleString('en')} / {MAX_ENTRIES_PER_DICT.toLocaleString('en')}
          </p>
        </div>
        {anyUnsaved && (
          <p id={unsavedNoteId} className="mt-1 text-xs text-amber-800" data-testid="hear-unsaved-note">
            Hear plays the saved dictionary: save to hear new or changed entries.
          </p>
        )}
        {rows.length === 0 ? (
          <p className="mt-2 rounded-md border border-dashed border-zinc-300 px-4 py-6 text-center text-sm text-zinc-600">No entries yet. Add one below.</p>
        ) : (
          <>
            <div
              className={`mt-2 hidden gap-3 border-b border-zinc-100 pb-2 text-xs font-semibold tracking-wide text-zinc-500 uppercase md:grid ${grid}`}
              aria-hidden="true"
            >
              <span>Word</span>
              <span>Type</span>
              <span>Say as / phonemes</span>
              <span>Case</span>
              <span className="sr-only">Actions</span>
            </div>
            <ol className="divide-y divide-zinc-100" aria-label="Entries">
              {rows.map((row, i) => (
                <li key={row.key} data-testid="entry-row" className={`grid grid-cols-1 gap-2 py-3 sm:grid-cols-2 md:items-center md:gap-3 ${grid}`}>
                  <Cell id={cellId(row, 'grapheme')} label={`Word, entry ${i + 1}`} shortLabel="Word" error={invalid(i, 'grapheme') ? error!.message : null}>
                    <input
                      id={cellId(row, 'grapheme')}
                      value={row.grapheme}
                      onChange={(e) => setRow(i, { grapheme: e.target.value })}
                      placeholder="e.g. SQL"
                      autoComplete="off"
                      aria-invalid={invalid(i, 'grapheme') || undefined}
                      aria-describedby={invalid(i, 'grapheme') ? `${cellId(row, 'grapheme')}-error` : undefined}
                      className={inputClass(invalid(i, 'grapheme'))}
                    />
                  </Cell>
                  <Cell id={cellId(row, 'kind')} label={`Type, entry ${i + 1}`} shortLabel="Type">
                    <select
                      id={cellId(row, 'kind')}
                      value={row.kind}
                      onChange={(e) => setRow(i, { kind: e.target.value as Row['kind'] })}
                      className={inputClass(false)}
                    >
                      <option value="alias">Alias (text)</option>
                      <option value="phoneme">Phonemes</option>
                    </select>
                  </Cell>
                  <Cell
                    id={cellId(row, 'value')}
                    label={`${row.kind === 'alias' ? 'Say as' : 'Phonemes'}, entry ${i + 1}`}
                    shortLabel={row.kind === 'alias' ? 'Say as' : 'Phonemes'}
                    error={invalid(i, 'value') ? error!.message : null}
                  >
                    <input
                      id={cellId(row, 'value')}
                      value={row.value}
                      onChange={(e) => setRow(i, { value: e.target.value })}
                      placeholder={row.kind === 'alias' ? 'e.g. sequel' : "e.g. s'i:kw@l"}
                      autoComplete="off"
                      spellCheck={row.kind === 'alias'}
                      aria-invalid={invalid(i, 'value') || undefined}
                      aria-describedby={invalid(i, 'value') ? `${cellId(row, 'value')}-error` : undefined}
                      className={`${inputClass(invalid(i, 'value'))} ${row.kind === 'phoneme' ? 'font-mono' : ''}`}
                    />
                  </Cell>
                  <label className="flex min-h-10 items-center gap-2 text-sm text-zinc-800">
                    <input
                      id={cellId(row, 'caseSensitive')}
                      type="checkbox"
                      checked={row.caseSensitive}
                      onChange={(e) => setRow(i, { caseSensitive: e.target.checked })}
                      className="size-4 rounded border-zinc-300 text-indigo-600 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-600"
                    />
                    <span>
                      Case-sensitive<span className="sr-only">, entry {i + 1}</span>
                    </span>
                  </label>
                  <div className="flex gap-1 sm:justify-self-end">
                    {/* Not disabled while its take loads: a disabled button would drop the keyboard focus. */}
                    <Button
                      variant="ghost"
                      className="min-h-9 px-3 py-1.5 text-indigo-700"
                      onClick={() => hearing.pendingRow === null && hearing.hear(row.key, row.grapheme)}
                      disabled={!isSaved(row) || !hearing.ready}
                      aria-busy={hearing.pendingRow === row.key || undefined}
                      aria-describedby={isSaved(row) ? undefined : unsavedNoteId}
                      aria-label={`Hear entry ${i + 1}${row.grapheme ? ` (${row.grapheme})` : ''}`}
                    >
                      {hearing.pendingRow === row.key && <Spinner className="size-4" />}
                      Hear
                    </Button>
                    <Button
                      id={`${idPrefix}-${row.key}-remove`}
                      variant="ghost"
                      className="min-h-9 px-3 py-1.5 text-red-700"
                      onClick={() => removeRow(i)}
                      aria-label={`Remove entry ${i + 1}${row.grapheme ? ` (${row.grapheme})` : ''}`}
                    >
                      Remove
                    </Button>
                  </div>
                  {isSaved(row) && <HearResult hearing={hearing} rowKey={row.key} grapheme={row.grapheme} className="sm:col-span-2 md:col-span-5" />}
                </li>
              ))}
            </ol>
          </>
        )}
        <Button id={`${idPrefix}-add`} variant="secondary" className="mt-3" onClick={addRow} disabled={full}>
          Add entry
        </Button>
        {full && <p className="mt-1 text-xs text-zinc-500">A dictionary holds at most {MAX_ENTRIES_PER_DICT.toLocaleString('en')} entries.</p>}
      </div>

      {/* A cell's error is shown under the cell, which gets the focus and is described by it; here, the others. */}
      {error && error.field !== 'name' && error.row === null && (
        <div id={`${idPrefix}-error`}>
          <Alert>{error.message}</Alert>
        </div>
      )}

      <div className="flex flex-col gap-2 border-t border-zinc-100 pt-4 sm:flex-row sm:items-center">
        <Button type="submit" pending={save.isPending}>
          Save dictionary
        </Button>
        <Button variant="secondary" onClick={discard} disabled={!dirty || save.isPending}>
          Discard changes
        </Button>
      </div>
    </form>
  );
}

/** An invalid cell stays red while it has the focus (the focus ring used to paint over the mark). */
function inputClass(invalid: boolean): string {
  return `block w-full min-w-0 rounded-md border-0 px-3 py-2 text-base text-zinc-900 ring-inset placeholder:text-zinc-400 focus:ring-2 focus:ring-inset focus:outline-none sm:text-sm ${invalid ? 'bg-red-50 ring-2 ring-red-500 focus:ring-red-600' : 'bg-white ring-1 ring-zinc-300 focus:ring-indigo-600'}`;
}

/**
 * A table cell with a label that is visible on narrow screens (no header row there) and read
 * out everywhere; an invalid cell shows its message right under it.
 */
function Cell({ id, label, shortLabel, error, children }: { id: string; label: string; shortLabel: string; error?: string | null; children: React.ReactNode }) {
  return (
    <div className="min-w-0" data-invalid={error ? true : undefined}>
      <label htmlFor={id} className={`mb-1 block text-xs font-medium md:sr-only ${error ? 'text-red-700' : 'text-zinc-600'}`}>
        <span aria-hidden="true">{shortLabel}</span>
        <span className="sr-only">{label}</span>
      </label>
      {children}
      {error && (
        <p id={`${id}-error`} className="mt-1 text-xs text-red-700" data-testid="cell-error">
          {error}
        </p>
      )}
    </div>
  );
}
