'use client';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import Link from 'next/link';
import { useEffect, useId, useRef, useState, type FormEvent, type KeyboardEvent } from 'react';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Button } from '@/app/_components/button';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { ConfirmDialog } from '@/app/_components/confirm-dialog';
import { CopyButton } from '@/app/_components/copy-button';
import { SelectField } from '@/app/_components/fields';
import { LoadingBlock } from '@/app/_components/spinner';
import { TextField } from '@/app/_components/text-field';
import type { RouterInputs, RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, formatDateTime, usd } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import { FirstRequest } from '../overview';

type KeyRow = RouterOutputs['keys']['list'][number];
type CreateInput = RouterInputs['keys']['create'];
type UpdateInput = RouterInputs['keys']['update'];

/**
 * The create form's limits as the server takes them, or why they are not: an empty field is no
 * limit; the expiry is typed in the browser's time zone and sent as an instant.
 */
function limitsOf(form: FormData): { input: Omit<CreateInput, 'name'> } | { error: string } {
  const input: Omit<CreateInput, 'name'> = {};
  const limit = String(form.get('spendLimitUsd') ?? '')
    .trim()
    .replace(/^\$/, '');
  if (limit !== '') {
    input.spendLimitUsd = limit;
    input.spendWindow = form.get('spendWindow') === 'day' ? 'day' : 'month';
  }
  const expires = String(form.get('expiresAt') ?? '');
  if (expires !== '') {
    const at = new Date(expires);
    if (Number.isNaN(at.getTime())) return { error: 'Enter the expiry as a date and time.' };
    input.expiresAt = at.toISOString();
  }
  const models = form.getAll('models').map(String);
  if (models.length > 0) input.models = models;
  return { input };
}

/** An instant as a datetime-local field shows it: the browser's time zone, to the minute. */
function localInputValue(iso: string | null): string {
  if (!iso) return '';
  const d = new Date(iso);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

/** The limits form as a key's row fills it in. */
function limitDefaults(k: KeyRow): LimitDefaults {
  return {
    spendLimitUsd: k.budget ? k.budget.limitUsd.replace(/\.?0+$/, '') : '',
    spendWindow: k.budget?.window ?? 'month',
    expiresAt: localInputValue(k.expiresAt),
    models: k.models ?? [],
  };
}

/**
 * What the edit form changes of a key's limits, as keys.update takes them: only the fields that
 * differ from the key's (an untouched past expiry is not sent again), an emptied field as null
 * (no limit, never expires, every model).
 */
function limitChangesOf(form: FormData, k: KeyRow): { input: Omit<UpdateInput, 'id'> } | { error: string } {
  const was = limitDefaults(k);
  const input: Omit<UpdateInput, 'id'> = {};
  const limit = String(form.get('spendLimitUsd') ?? '')
    .trim()
    .replace(/^\$/, '');
  const window = form.get('spendWindow') === 'day' ? 'day' : 'month';
  if (limit === '') {
    if (k.budget) input.spendLimitUsd = null;
  } else if (limit !== was.spendLimitUsd || window !== was.spendWindow || !k.budget) {
    input.spendLimitUsd = limit;
    input.spendWindow = window;
  }
  const expires = String(form.get('expiresAt') ?? '');
  if (expires !== was.expiresAt) {
    if (expires === '') input.expiresAt = null;
    else {
      const at = new Date(expires);
      if (Number.isNaN(at.getTime())) return { error: 'Enter the expiry as a date and time.' };
      input.expiresAt = at.toISOString();
    }
  }
  const models = form.getAll('models').map(String);
  const same = models.length === was.models.length && models.every((m) => was.models.includes(m));
  if (!same) input.models = models.length > 0 ? models : null;
  return { input };
}

/** "$0.20 of $2.50 spent today", "this month". */
function spendLine(budget: NonNullable<KeyRow['budget']>): string {
  return `${usd(budget.spentUsd)} of ${usd(budget.limitUsd)} spent ${budget.window === 'day' ? 'today (UTC)' : 'this month (UTC)'}`;
}

export function KeysManager() {
  const trpc = useTRPC();
  const me = useQuery(trpc.account.me.queryOptions());
  // Creating and revoking keys is for owners (the server enforces it; this only explains it).
  // Until the role is known neither the form nor the note is shown.
  const canManage = me.data?.canManage;
  return (
    <>
      <PageHeader title="API keys" description="Keys authenticate requests to the gateway. Anyone with a key can spend your organization's credit." />
      <div className="space-y-6">
        {canManage === true && <CreateKey />}
        {canManage === false && (
          <div data-testid="keys-member-note">
            <Alert tone="info" title="Only owners can create or revoke keys">
              You are a member of <strong>{me.data?.org.name}</strong>: you can see its keys and what they spent. Ask an owner (see{' '}
              <Link href="/members" className="font-semibold underline">
                Members
              </Link>
              ) for a key or to revoke one.
            </Alert>
          </div>
        )}
        <KeyList canRevoke={canManage === true} />
      </div>
    </>
  );
}

function CreateKey() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const formRef = useRef<HTMLFormElement>(null);
  const keyInput = useRef<HTMLInputElement>(null);
  // The full key lives only here, in this component's state, until "Done": it is never
  // stored, and cannot be fetched again.
  const [created, setCreated] = useState<{ name: string; key: string } | null>(null);
  const [formError, setFormError] = useState<string | null>(null);
  const gatewayUrl = useQuery(trpc.account.overview.queryOptions()).data?.gatewayUrl;
  const create = useMutation(
    trpc.keys.create.mutationOptions({
      onSuccess: (data) => {
        setCreated({ name: data.name, key: data.key });
        formRef.current?.reset();
        void queryClient.invalidateQueries({ queryKey: trpc.keys.list.queryKey() });
        void queryClient.invalidateQueries({ queryKey: trpc.account.overview.queryKey() });
      },
    }),
  );

  return (
    <Card title="Create a key" description="Name it after where it will be used, so you know what breaks if you revoke it.">
      <form
        ref={formRef}
        onSubmit={(event) => {
          event.preventDefault();
          const form = new FormData(event.currentTarget);
          const name = String(form.get('name') ?? '');
          setCreated(null);
          const limits = limitsOf(form);
          if ('error' in limits) return setFormError(limits.error);
          setFormError(null);
          create.mutate({ name, ...limits.input });
        }}
      >
        <div className="flex flex-col gap-3 sm:flex-row sm:items-end">
          <TextField label="Key name" name="name" required maxLength={100} placeholder="e.g. production voice agent" className="flex-1" />
          <Button type="submit" pending={create.isPending}>
            Create key
          </Button>
        </div>
        <KeyLimitsFields />
      </form>
      {formError && (
        <div className="mt-3">
          <Alert>{formError}</Alert>
        </div>
      )}
      {create.error && (
        <div className="mt-3">
          <Alert>{errorMessage(create.error)}</Alert>
        </div>
      )}
      {created && (
        <div role="status" aria-live="polite" className="mt-4 rounded-md border border-emerald-200 bg-emerald-50 p-4" data-testid="new-key-panel">
          <p className="text-sm font-semibold text-emerald-900">Key “{created.name}” created</p>
          <p className="mt-1 text-sm text-emerald-900">Copy it now and store it somewhere safe. It will not be shown again.</p>
          <div className="mt-3 flex flex-col gap-2 sm:flex-row">
            <label htmlFor="new-api-key" className="sr-only">
              New API key
            </label>
            <input
              id="new-api-key"
              ref={keyInput}
              readOnly
              value={created.key}
              data-testid="new-api-key"
              onFocus={(e) => e.currentTarget.select()}
              className="block w-full min-w-0 rounded-md border-0 bg-white px-3 py-2 font-mono text-sm text-zinc-900 ring-1 ring-inset ring-emerald-300"
            />
            <CopyButton value={created.key} fallbackTarget={() => keyInput.current} />
          </div>
          <div className="mt-4 border-t border-emerald-200 pt-3 text-sm text-emerald-900" data-testid="try-new-key">
            <p className="font-semibold">Try it: your first request</p>
            <p className="mt-1">
              Paste this into a terminal. It speaks a sentence into hello.wav with this key (a metered request: the organization needs credit).
            </p>
            {gatewayUrl && <FirstRequest gatewayUrl={gatewayUrl} apiKey={created.key} testId="new-key-request" />}
          </div>
          <Button variant="ghost" className="mt-2 -ml-2" onClick={() => setCreated(null)}>
            Done, I have stored it
          </Button>
        </div>
      )}
    </Card>
  );
}

// The name has the room it needs (it wraps rather than being cut); the status column holds the
// revocation date, so Actions holds only actions.
const GRID_COLUMNS = 'md:grid-cols-[minmax(0,3fr)_7rem_6.5rem_minmax(0,1.2fr)_minmax(0,1fr)_minmax(0,1fr)_7rem]';
const MAX_RPM = 1_000_000;

/** "600/min (default)" or "2/min". */
function formatRateLimit(k: Pick<KeyRow, 'rateLimitRpm' | 'defaultRateLimitRpm'>): string {
  return k.rateLimitRpm === null ? `${k.defaultRateLimitRpm.toLocaleString('en')}/min (default)` : `${k.rateLimitRpm.toLocaleString('en')}/min`;
}

function KeyList({ canRevoke }: { canRevoke: boolean }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const keys = useQuery(trpc.keys.list.queryOptions());
  const me = useQuery(trpc.account.me.queryOptions());
  const isPlatformAdmin = me.data?.user.isPlatformAdmin ?? false;
  const [target, setTarget] = useState<KeyRow | null>(null);
  // Read out after a rate limit change, once the list shows the new value.
  const [announcement, setAnnouncement] = useState('');
  const revoke = useMutation(
    trpc.keys.revoke.mutationOptions({
      onSuccess: () => {
        setTarget(null);
        void queryClient.invalidateQueries({ queryKey: trpc.keys.list.queryKey() });
        void queryClient.invalidateQueries({ queryKey: trpc.account.overview.queryKey() });
      },
    }),
  );

  return (
    <Card title="Your keys">
      {keys.isPending ? (
        <LoadingBlock label="Loading keys" />
      ) : keys.isError ? (
        <Alert title="Could not load your keys" onRetry={() => void keys.refetch()}>
          {errorMessage(keys.error)}
        </Alert>
      ) : keys.data.length === 0 ? (
        <EmptyState title="No keys yet">
          {canRevoke ? 'Create one above to start calling the gateway.' : 'An owner of this organization can create one.'}
        </EmptyState>
      ) : (
        <>
          <div
            className={`hidden gap-4 border-b border-zinc-100 pb-2 text-xs font-semibold tracking-wide text-zinc-500 uppercase md:grid ${GRID_COLUMNS}`}
            aria-hidden="true"
          >
            <span>Name</span>
            <span>Key</span>
            <span>Status</span>
            <span>Rate limit</span>
            <span>Created</span>
            <span>Last used</span>
            <span className="sr-only">Actions</span>
          </div>
          <ul className="divide-y divide-zinc-100" aria-label="API keys">
            {keys.data.map((k) => (
              <KeyListItem
                key={k.id}
                k={k}
                canSetRateLimit={isPlatformAdmin && k.status === 'active'}
                canRevoke={canRevoke}
                onLimitsSaved={() => setAnnouncement(`The limits of key ${k.name || k.prefix} are saved; they apply from its next request.`)}
                onRevoke={() => {
                  revoke.reset();
                  setTarget(k);
                }}
                onRateLimitSaved={(saved) =>
                  setAnnouncement(`Rate limit of key ${k.name || k.prefix} is now ${formatRateLimit({ ...k, rateLimitRpm: saved })}.`)
                }
              />
            ))}
          </ul>
          <p className="sr-only" role="status" aria-live="polite">
            {announcement}
          </p>
        </>
      )}
      <ConfirmDialog
        open={target !== null}
        title="Revoke this key?"
        confirmLabel="Revoke key"
        pending={revoke.isPending}
        error={revoke.error ? errorMessage(revoke.error) : null}
        onCancel={() => setTarget(null)}
        onConfirm={() => target && revoke.mutate({ id: target.id })}
      >
        {/* A long name (up to the key name limit, no spaces) wraps inside the dialog rather than running out of it. */}
        <p className="[overflow-wrap:anywhere]" data-testid="revoke-key-text">
          <span className="font-semibold">{target?.name || '(unnamed)'}</span> <span className="font-mono">({target?.prefix}…)</span> will stop working
          immediately: every request with it will be refused. This cannot be undone.
        </p>
      </ConfirmDialog>
    </Card>
  );
}

function KeyListItem({
  k,
  canSetRateLimit,
  canRevoke,
  onRevoke,
  onRateLimitSaved,
  onLimitsSaved,
}: {
  k: KeyRow;
  canSetRateLimit: boolean;
  canRevoke: boolean;
  onRevoke: () => void;
  onRateLimitSaved: (rpm: number | null) => void;
  onLimitsSaved: () => void;
}) {
  const [editing, setEditing] = useState(false);
  const [editingLimits, setEditingLimits] = useState(false);
  const changeButton = useRef<HTMLButtonElement>(null);
  const limitsButton = useRef<HTMLButtonElement>(null);
  const editorId = useId();
  const limitsEditorId = useId();
  const closeLimits = () => {
    setEditingLimits(false);
    limitsButton.current?.focus();
  };
  const label = k.name || k.prefix;
  const close = () => {
    setEditing(false);
    // Back to where the keyboard was before the editor opened.
    changeButton.current?.focus();
  };

  return (
    <li data-testid="key-row" data-key-id={k.id} className={`grid grid-cols-[minmax(0,1fr)_auto] items-center gap-x-4 gap-y-1 py-3 ${GRID_COLUMNS}`}>
      <span className="min-w-0">
        <span className="font-medium break-words text-zinc-900" data-testid="key-name">
          {k.name || <span className="text-zinc-500">(unnamed)</span>}
        </span>
        {k.isTrial && (
          <span className="ml-2 align-middle">
            <Badge tone="amber">Trial</Badge>
          </span>
        )}
        {k.origin !== 'api' && (
          <span className="ml-2 align-middle">
            <Badge tone="indigo">{k.origin === 'dashboard' ? 'Dashboard' : 'Agent'}</Badge>
          </span>
        )}
        <KeyOrigin k={k} />
        <KeyLimits k={k} />
      </span>
      <span className="order-3 col-span-2 font-mono text-sm text-zinc-700 md:order-none md:col-span-1">
        <span className="sr-only">Key prefix </span>
        {k.prefix}…
      </span>
      <span className="flex flex-col items-end gap-0.5 justify-self-end md:items-start md:justify-self-start" data-testid="key-status">
        <Badge tone={k.status === 'active' && !k.expired ? 'green' : 'gray'}>{k.status === 'revoked' ? 'Revoked' : k.expired ? 'Expired' : 'Active'}</Badge>
        {k.status === 'revoked' && k.revokedAt && (
          <span className="text-xs text-zinc-500" data-testid="key-revoked-at">
            {formatDateTime(k.revokedAt)}
          </span>
        )}
      </span>
      <span className="order-4 col-span-2 flex flex-wrap items-center gap-x-2 text-sm text-zinc-600 md:order-none md:col-span-1">
        <span>
          <span className="md:sr-only">Rate limit </span>
          <span data-testid="key-rate-limit">{formatRateLimit(k)}</span>
        </span>
        {canSetRateLimit && (
          <button
            ref={changeButton}
            type="button"
            onClick={() => setEditing((open) => !open)}
            aria-expanded={editing}
            aria-controls={editing ? editorId : undefined}
            aria-label={`Change rate limit of key ${label}`}
            className="rounded text-sm font-medium text-indigo-700 underline-offset-2 hover:underline focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-600"
          >
            Change
          </button>
        )}
      </span>
      <span className="order-4 col-span-2 text-sm text-zinc-600 md:order-none md:col-span-1">
        <span className="md:sr-only">Created </span>
        {formatDateTime(k.createdAt)}
      </span>
      <span className="order-5 text-sm text-zinc-600 md:order-none">
        <span className="md:sr-only">Last used </span>
        {formatDateTime(k.lastUsedAt, 'Never')}
      </span>
      <span className="order-6 flex flex-wrap justify-end gap-2 justify-self-end md:order-none md:flex-col md:items-end">
        {k.status === 'active' && canRevoke && (
          <>
            <Button
              ref={limitsButton}
              variant="secondary"
              className="min-h-8 px-3 py-1 whitespace-nowrap"
              onClick={() => setEditingLimits((open) => !open)}
              aria-expanded={editingLimits}
              aria-controls={editingLimits ? limitsEditorId : undefined}
              aria-label={`Edit limits of key ${label}`}
            >
              Edit limits
            </Button>
            <Button variant="secondary" className="min-h-8 px-3 py-1" onClick={onRevoke} aria-label={`Revoke key ${label}`}>
              Revoke
            </Button>
          </>
        )}
      </span>
      {canRevoke && k.status === 'active' && editingLimits && (
        <LimitsEditor
          id={limitsEditorId}
          k={k}
          label={label}
          onCancel={closeLimits}
          onSaved={() => {
            onLimitsSaved();
            closeLimits();
          }}
        />
      )}
      {canSetRateLimit && editing && (
        <RateLimitEditor
          id={editorId}
          k={k}
          label={label}
          onCancel={close}
          onSaved={(rpm) => {
            onRateLimitSaved(rpm);
            close();
          }}
        />
      )}
    </li>
  );
}

interface LimitDefaults {
  spendLimitUsd: string;
  spendWindow: 'day' | 'month';
  /** As a datetime-local field holds it. */
  expiresAt: string;
  models: string[];
}

/**
 * A key's optional limits: a spend limit per UTC day or month, an expiry and the models the key
 * may use (none ticked: every model). The gateway enforces each. Folded away in the create form;
 * open, filled in with the key's, in a key's edit form.
 */
function KeyLimitsFields({ defaults }: { defaults?: LimitDefaults }) {
  const fields = <LimitInputs defaults={defaults} />;
  if (defaults) return fields;
  return (
    <details className="mt-4 rounded-md border border-zinc-200 p-3" data-testid="key-limits-form">
      <summary className="cursor-pointer text-sm font-medium text-zinc-900">Limits (optional): spend limit, expiry, models</summary>
      {fields}
    </details>
  );
}

function LimitInputs({ defaults }: { defaults?: LimitDefaults }) {
  const trpc = useTRPC();
  const models = useQuery(trpc.models.catalog.queryOptions({}));
  return (
    <>
      <div className="mt-3 grid gap-3 sm:grid-cols-3">
        <TextField
          label="Spend limit (USD)"
          name="spendLimitUsd"
          inputMode="decimal"
          autoComplete="off"
          placeholder="No limit"
          defaultValue={defaults?.spendLimitUsd}
          hint="Past it, requests with the key get 402 key_budget_exceeded until the window starts again."
        />
        <SelectField label="Per" name="spendWindow" defaultValue={defaults?.spendWindow ?? 'month'} hint="Windows start at midnight UTC.">
          <option value="month">Calendar month</option>
          <option value="day">Day</option>
        </SelectField>
        <TextField
          label="Expires"
          name="expiresAt"
          type="datetime-local"
          defaultValue={defaults?.expiresAt}
          hint="In your time zone. Empty: never. After it: 401 api_key_expired."
        />
      </div>
      <fieldset className="mt-3">
        <legend className="text-sm font-medium text-zinc-900">Models</legend>
        <p className="text-xs text-zinc-500">None ticked: every model. Ticked: only these; others get 403 model_not_allowed.</p>
        {models.isError ? (
          <p className="mt-1 text-xs text-red-700">Could not load the models: {errorMessage(models.error)}</p>
        ) : (
          <div className="mt-2 flex flex-wrap gap-x-4 gap-y-1">
            {(models.data ?? []).map((m) => (
              <label key={m.id} className="flex items-center gap-1.5 text-sm text-zinc-800">
                <input
                  type="checkbox"
                  name="models"
                  value={m.id}
                  defaultChecked={defaults?.models.includes(m.id)}
                  className="h-4 w-4 rounded border-zinc-300"
                />
                <span className="font-mono">{m.id}</span>
                <span className="text-xs text-zinc-500">{m.modality.toUpperCase()}</span>
              </label>
            ))}
          </div>
        )}
      </fieldset>
    </>
  );
}

/** Owners: the inline form under a key row that changes its limits (keys.update), filled in with the key's. */
function LimitsEditor({ id, k, label, onCancel, onSaved }: { id: string; k: KeyRow; label: string; onCancel: () => void; onSaved: () => void }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [formError, setFormError] = useState<string | null>(null);
  const update = useMutation(
    trpc.keys.update.mutationOptions({
      // Close only once the list shows the new limits.
      onSuccess: async () => {
        await queryClient.invalidateQueries({ queryKey: trpc.keys.list.queryKey() });
        onSaved();
      },
    }),
  );
  const error = formError ?? (update.error ? errorMessage(update.error) : null);
  return (
    <form
      id={id}
      noValidate
      aria-label={`Limits of key ${label}`}
      onSubmit={(event) => {
        event.preventDefault();
        const changes = limitChangesOf(new FormData(event.currentTarget), k);
        update.reset();
        if ('error' in changes) return setFormError(changes.error);
        setFormError(null);
        if (Object.keys(changes.input).length === 0) return onCancel();
        update.mutate({ id: k.id, ...changes.input });
      }}
      onKeyDown={(event) => {
        if (event.key === 'Escape' && !update.isPending) {
          event.preventDefault();
          onCancel();
        }
      }}
      className="order-7 col-span-full mt-2 rounded-md border border-zinc-200 bg-zinc-50 p-3"
      data-testid="key-limits-editor"
    >
      <p className="text-sm text-zinc-700">
        Empty a field to remove that limit. Changes apply from the key&apos;s next request; sessions already open keep the expiry they started with.
      </p>
      <KeyLimitsFields defaults={limitDefaults(k)} />
      {error && (
        <div className="mt-3" role="alert">
          <Alert>{error}</Alert>
        </div>
      )}
      <div className="mt-3 flex flex-wrap gap-2">
        <Button type="submit" className="min-h-9 px-3 py-1.5" pending={update.isPending}>
          Save limits
        </Button>
        <Button variant="ghost" className="min-h-9 px-3 py-1.5" disabled={update.isPending} onClick={onCancel}>
          Cancel
        </Button>
      </div>
    </form>
  );
}

/** A key's budget and scope, under its name: this window's spend against its limit, its expiry, its models. */
function KeyLimits({ k }: { k: KeyRow }) {
  const parts: React.ReactNode[] = [];
  if (k.budget) parts.push(<span key="spend">{spendLine(k.budget)}</span>);
  if (k.expiresAt) parts.push(<span key="expiry">{k.expired ? `Expired ${formatDateTime(k.expiresAt)}` : `Expires ${formatDateTime(k.expiresAt)}`}</span>);
  if (k.models) parts.push(<span key="models">Models: {k.models.join(', ')}</span>);
  if (parts.length === 0) return null;
  return (
    <span className="mt-0.5 flex flex-wrap gap-x-3 text-xs text-zinc-600 [overflow-wrap:anywhere]" data-testid="key-limits">
      {parts}
    </span>
  );
}

/** What made a key that this page did not: the dashboard itself, or an agent someone authorised. */
function KeyOrigin({ k }: { k: KeyRow }) {
  if (k.origin === 'dashboard') {
    return (
      <span className="mt-0.5 block text-xs text-zinc-500" data-testid="key-origin">
        Made by the dashboard for the playground, voice cloning and voice previews; billed like any key (previews are free). Revoking it is harmless: the next
        use makes a new one.
      </span>
    );
  }
  if (k.origin === 'agent' && k.agent) {
    const a = k.agent;
    return (
      <span className="mt-0.5 block text-xs text-zinc-500" data-testid="key-origin">
        {a.registrationType === 'anonymous' ? 'Anonymous agent' : 'Agent registered'}
        {a.claimedFor ? ` for ${a.claimedFor}` : ''}; authorised by {a.confirmedBy ?? 'a former member'}
        {a.confirmedAt ? ` on ${formatDateTime(a.confirmedAt)}` : ''}. Registration <span className="font-mono break-all">{a.registrationId}</span>.
      </span>
    );
  }
  return null;
}

/** Parses what an operator typed: a whole number of requests per minute, or a reason it is not one. */
function parseRpm(raw: string): { rpm: number } | { error: string } {
  const text = raw.trim().replace(/[,_\s]/g, '');
  if (text === '') return { error: 'Enter a number of requests per minute, or choose “Use default”.' };
  if (!/^\d+$/.test(text)) return { error: 'Enter a whole number of requests per minute, e.g. 120.' };
  const rpm = Number(text);
  if (rpm < 1) return { error: 'The rate limit must be at least 1 request per minute.' };
  if (rpm > MAX_RPM) return { error: `The rate limit can be at most ${MAX_RPM.toLocaleString('en')} requests per minute.` };
  return { rpm };
}

/** Platform admins: the inline form under a key row that sets or resets its rate limit. */
function RateLimitEditor({
  id,
  k,
  label,
  onCancel,
  onSaved,
}: {
  id: string;
  k: KeyRow;
  label: string;
  onCancel: () => void;
  onSaved: (rpm: number | null) => void;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const form = useRef<HTMLFormElement>(null);
  const focusInput = () => {
    const input = form.current?.elements.namedItem('rpm');
    if (input instanceof HTMLInputElement) {
      input.focus();
      input.select();
    }
  };
  const [value, setValue] = useState(k.rateLimitRpm === null ? '' : String(k.rateLimitRpm));
  const [inputError, setInputError] = useState<string | null>(null);
  const setRateLimit = useMutation(
    trpc.keys.setRateLimit.mutationOptions({
      // Close only once the list shows the new value, so what the page says is what the gateway applies.
      onSuccess: async (result) => {
        await queryClient.invalidateQueries({ queryKey: trpc.keys.list.queryKey() });
        onSaved(result.rateLimitRpm);
      },
      onError: () => focusInput(),
    }),
  );
  useEffect(() => {
    focusInput();
  }, []);

  const error = inputError ?? (setRateLimit.error ? errorMessage(setRateLimit.error) : null);
  const save = (rpm: number | null) => {
    setInputError(null);
    setRateLimit.reset();
    setRateLimit.mutate({ id: k.id, rpm });
  };
  const onSubmit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const parsed = parseRpm(value);
    if ('error' in parsed) {
      setRateLimit.reset();
      setInputError(parsed.error);
      focusInput();
      return;
    }
    save(parsed.rpm);
  };
  const onKeyDown = (event: KeyboardEvent<HTMLFormElement>) => {
    if (event.key === 'Escape' && !setRateLimit.isPending) {
      event.preventDefault();
      onCancel();
    }
  };

  return (
    <form
      ref={form}
      id={id}
      noValidate
      aria-label={`Rate limit of key ${label}`}
      onSubmit={onSubmit}
      onKeyDown={onKeyDown}
      className="order-7 col-span-full mt-2 rounded-md border border-zinc-200 bg-zinc-50 p-3"
      data-testid="rate-limit-editor"
    >
      <div className="flex flex-col gap-3 sm:flex-row sm:items-start">
        <TextField
          label="Requests per minute"
          name="rpm"
          inputMode="numeric"
          autoComplete="off"
          value={value}
          onChange={(e) => {
            setValue(e.target.value);
            setInputError(null);
          }}
          placeholder={String(k.defaultRateLimitRpm)}
          hint={`1 to ${MAX_RPM.toLocaleString('en')}. “Use default” puts the key back on ${k.defaultRateLimitRpm.toLocaleString('en')}/min. Applies from the key's next request.`}
          error={error}
          className="min-w-0 sm:w-72"
        />
        <div className="flex flex-wrap gap-2 sm:mt-6">
          <Button
            type="submit"
            className="min-h-9 px-3 py-1.5"
            disabled={setRateLimit.isPending}
            pending={setRateLimit.isPending && setRateLimit.variables?.rpm !== null}
          >
            Save limit
          </Button>
          <Button
            variant="secondary"
            className="min-h-9 px-3 py-1.5"
            disabled={setRateLimit.isPending}
            pending={setRateLimit.isPending && setRateLimit.variables?.rpm === null}
            onClick={() => save(null)}
          >
            Use default
          </Button>
          <Button variant="ghost" className="min-h-9 px-3 py-1.5" disabled={setRateLimit.isPending} onClick={onCancel}>
            Cancel
          </Button>
        </div>
      </div>
    </form>
  );
}
