'use client';
import { useInfiniteQuery, useMutation, useQueryClient } from '@tanstack/react-query';
import Link from 'next/link';
import { usePathname, useRouter, useSearchParams } from 'next/navigation';
import { useEffect, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Button } from '@/app/_components/button';
import { Card, EmptyState } from '@/app/_components/card';
import { SelectField } from '@/app/_components/fields';
import { LoadingBlock } from '@/app/_components/spinner';
import { TextField } from '@/app/_components/text-field';
import type { RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, plural } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import { PlaySampleButton, VoiceSamplesProvider } from './voice-samples';

type ListedVoice = RouterOutputs['voices']['list']['voices'][number];

const SCOPES = [
  { value: 'featured', label: 'Featured' },
  { value: 'all', label: 'All' },
  { value: 'mine', label: 'Mine' },
  { value: 'saved', label: 'Saved' },
] as const;
type Scope = (typeof SCOPES)[number]['value'];

export const KIND_LABELS: Record<ListedVoice['kind'], string> = {
  library: 'Library',
  instant_clone: 'Instant clone',
  pro_clone: 'Pro clone',
  localized: 'Localized',
};
const LANGUAGE = /^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})?$/;
const PAGE_SIZE = 24;

/** The value after the user stopped typing for a moment, so each keystroke is not a query. */
function useDebounced<T>(value: T, ms = 300): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return settled;
}

/** The first model the voice can speak on (a ready profile), for its sample; null when none. */
/** The model a voice's Play button plays it on: the first whose preview is ready, else its first ready profile's (the preview is being made). */
export const sampleModelOf = (voice: Pick<ListedVoice, 'profiles' | 'preview_models'>) =>
  voice.preview_models[0] ?? voice.profiles.find((p) => p.status === 'ready')?.model_id ?? null;

const isScope = (value: string | null): value is Scope => SCOPES.some((s) => s.value === value);

export function VoicesBrowser({ onCloneRequested }: { onCloneRequested?: () => void }) {
  const trpc = useTRPC();
  // The filters live in the address too (?scope=&gender=&language=&tag=&q=): a filtered list can be reloaded, shared and gone back to.
  const params = useSearchParams();
  const router = useRouter();
  const pathname = usePathname();
  const [scope, setScope] = useState<Scope>(() => {
    const s = params.get('scope');
    return isScope(s) ? s : 'all';
  });
  const [gender, setGender] = useState(() => params.get('gender') ?? '');
  const [language, setLanguage] = useState(() => params.get('language') ?? '');
  const [tag, setTag] = useState(() => params.get('tag') ?? '');
  const [q, setQ] = useState(() => params.get('q') ?? '');
  const typed = useDebounced({ language: language.trim(), tag: tag.trim(), q: q.trim() });
  const filterKey = JSON.stringify({ scope: scope === 'all' ? '' : scope, gender, language: typed.language, tag: typed.tag, q: typed.q });
  useEffect(() => {
    // Only the filters' own parameters change: others (e.g. ?deleted= from a voice's page) stay.
    const next = new URLSearchParams(window.location.search);
    for (const [name, value] of Object.entries(JSON.parse(filterKey) as Record<string, string>)) {
      if (value) next.set(name, value);
      else next.delete(name);
    }
    const query = next.toString();
    if (query !== new URLSearchParams(window.location.search).toString()) router.replace(query ? `${pathname}?${query}` : pathname, { scroll: false });
  }, [filterKey, pathname, router]);
  const languageError = typed.language && !LANGUAGE.test(typed.language) ? 'Use a language tag such as en or en-US.' : null;
  const input = {
    scope,
    limit: PAGE_SIZE,
    ...(gender ? { gender } : {}),
    ...(typed.language && !languageError ? { language: typed.language } : {}),
    ...(typed.tag ? { tag: typed.tag.slice(0, 40) } : {}),
    ...(typed.q ? { q: typed.q.slice(0, 200) } : {}),
  };
  const voices = useInfiniteQuery(trpc.voices.list.infiniteQueryOptions(input, { getNextPageParam: (last) => last.next_cursor ?? undefined }));
  const all = voices.data?.pages.flatMap((p) => p.voices) ?? [];
  const filtered = Boolean(gender || input.language || input.tag || input.q);

  return (
    <Card
      title="Voice library"
      description="Platform voices and your organization's own, newest first. Play hears the voice's preview, free. The same filters as GET /voices."
    >
      <div className="space-y-4">
        <div role="group" aria-label="Which voices" className="flex flex-wrap gap-2">
          {SCOPES.map((s) => (
            <button
              key={s.value}
              type="button"
              aria-pressed={scope === s.value}
              onClick={() => setScope(s.value)}
              className={`min-h-9 rounded-full px-4 py-1.5 text-sm font-medium focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-600 ${scope === s.value ? 'bg-indigo-600 text-white' : 'bg-white text-zinc-700 ring-1 ring-zinc-300 ring-inset hover:bg-zinc-50'}`}
            >
              {s.label}
            </button>
          ))}
        </div>
        <div className="grid gap-3 sm:grid-cols-2 lg:grid-cols-4">
          <TextField label="Search" type="search" value={q} onChange={(e) => setQ(e.target.value)} maxLength={200} placeholder="Name, description, tag" />
          <SelectField label="Gender" value={gender} onChange={(e) => setGender(e.target.value)}>
            <option value="">Any</option>
            <option value="female">Female</option>
            <option value="male">Male</option>
            <option value="neutral">Neutral</option>
          </SelectField>
          <TextField
            label="Language"
            value={language}
            onChange={(e) => setLanguage(e.target.value)}
            maxLength={12}
            placeholder="e.g. en or fr"
            error={languageError}
            autoComplete="off"
          />
          <TextField label="Tag" type="search" value={tag} onChange={(e) => setTag(e.target.value)} maxLength={40} placeholder="e.g. calm" autoComplete="off" />
        </div>

        {voices.isPending ? (
          <LoadingBlock label="Loading voices" lines={4} />
        ) : voices.isError && !voices.data ? (
          <Alert title="Could not load voices" onRetry={() => void voices.refetch()}>
            {errorMessage(voices.error)}
          </Alert>
        ) : all.length === 0 ? (
          <EmptyState
            title={
              filtered
                ? 'No voices match these filters'
                : scope === 'mine'
                  ? 'You have no voices of your own yet'
                  : scope === 'saved'
                    ? 'No saved voices yet'
                    : 'No voices'
            }
          >
            {filtered ? (
              'Clear a filter or search for something else.'
            ) : scope === 'mine' ? (
              onCloneRequested ? (
                <button type="button" onClick={onCloneRequested} className="font-semibold text-indigo-700 underline">
                  Clone one from a recording.
                </button>
              ) : (
                'Clone one from a recording.'
              )
            ) : scope === 'saved' ? (
              'Keep voices you use often here with their "Add to saved" button.'
            ) : null}
          </EmptyState>
        ) : (
          <>
            <p className="sr-only" role="status" aria-live="polite">
              {plural(all.length, 'voice')} shown{voices.hasNextPage ? ', more available' : ''}.
            </p>
            <VoiceSamplesProvider>
              <ul className="grid gap-3 sm:grid-cols-2" aria-label="Voices" aria-busy={voices.isFetching || undefined}>
                {all.map((v) => (
                  <VoiceCard key={v.id} voice={v} activeTag={typed.tag} onTag={setTag} />
                ))}
              </ul>
            </VoiceSamplesProvider>
            {voices.hasNextPage && (
              <div className="flex justify-center">
                <Button variant="secondary" pending={voices.isFetchingNextPage} onClick={() => void voices.fetchNextPage()}>
                  Load more voices
                </Button>
              </div>
            )}
            {voices.isFetchNextPageError && <Alert>Could not load more voices. Try again.</Alert>}
          </>
        )}
      </div>
    </Card>
  );
}

function VoiceCard({ voice, activeTag, onTag }: { voice: ListedVoice; activeTag: string; onTag: (tag: string) => void }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const save = useMutation(
    trpc.voices.setSaved.mutationOptions({
      onSuccess: () => void queryClient.invalidateQueries({ queryKey: trpc.voices.pathKey() }),
    }),
  );
  return (
    <li className="flex flex-col gap-2 rounded-md border border-zinc-200 p-3" data-testid="voice-card" data-voice-id={voice.id}>
      <div className="flex items-start justify-between gap-2">
        <div className="min-w-0">
          <Link
            href={`/voices/${encodeURIComponent(voice.id)}`}
            className="block truncate font-semibold text-indigo-700 hover:underline focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-600"
          >
            {voice.name}
          </Link>
          <p className="truncate text-xs text-zinc-500">
            {voice.language}
            {voice.gender ? ` · ${voice.gender}` : ''} · <span className="font-mono">{voice.id}</span>
          </p>
        </div>
        <div className="flex shrink-0 flex-wrap justify-end gap-1">
          {voice.is_owner && <Badge tone="indigo">Yours</Badge>}
          {voice.featured && <Badge tone="amber">Featured</Badge>}
          <Badge tone="gray">{KIND_LABELS[voice.kind]}</Badge>
        </div>
      </div>
      {voice.description && <p className="line-clamp-2 text-sm text-zinc-700">{voice.description}</p>}
      {voice.tags.length > 0 && (
        <ul className="flex flex-wrap gap-1" aria-label="Tags">
          {voice.tags.map((t) => (
            <li key={t}>
              {/* A tag filters the library by it (again: clears the filter). */}
              <button
                type="button"
                aria-pressed={activeTag === t}
                aria-label={activeTag === t ? `Stop filtering by the tag ${t}` : `Show voices tagged ${t}`}
                onClick={() => onTag(activeTag === t ? '' : t)}
                className={`rounded px-1.5 py-0.5 text-xs focus-visible:outline-2 focus-visible:outline-offset-1 focus-visible:outline-indigo-600 ${activeTag === t ? 'bg-indigo-600 text-white' : 'bg-zinc-100 text-zinc-600 hover:bg-indigo-50 hover:text-indigo-700'}`}
              >
                {t}
              </button>
            </li>
          ))}
        </ul>
      )}
      <div className="mt-auto flex flex-wrap items-center justify-between gap-2 pt-1">
        <span className="text-xs text-zinc-500">
          {voice.profiles
            .filter((p) => p.status === 'ready')
            .map((p) => p.model_id)
            .join(', ') || 'No ready profile'}
        </span>
        <span className="flex flex-wrap items-center gap-2">
          <PlaySampleButton voice={voice} modelId={sampleModelOf(voice)} />
          <Button
            variant="secondary"
            className="min-h-8 px-3 py-1"
            aria-pressed={voice.saved}
            aria-label={`${voice.saved ? 'Remove' : 'Add'} voice ${voice.name} ${voice.saved ? 'from' : 'to'} your saved voices`}
            pending={save.isPending}
            onClick={() => save.mutate({ id: voice.id, saved: !voice.saved })}
          >
            {voice.saved ? 'Saved ✓' : 'Add to saved'}
          </Button>
        </span>
      </div>
      {save.error && <Alert>{errorMessage(save.error)}</Alert>}
    </li>
  );
}
