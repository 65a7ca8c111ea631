'use client';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Button } from '@/app/_components/button';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { ConfirmDialog } from '@/app/_components/confirm-dialog';
import { CopyButton } from '@/app/_components/copy-button';
import { LoadingBlock } from '@/app/_components/spinner';
import { TextField } from '@/app/_components/text-field';
import { errorMessage, formatDateTime } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';

interface KeyRow {
  id: string;
  name: string;
  prefix: string;
  status: 'active' | 'revoked';
  isTrial: boolean;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

export function KeysManager() {
  return (
    <>
      <PageHeader title="API keys" description="Keys authenticate requests to the gateway. Anyone with a key can spend your organization's credit." />
      <div className="space-y-6">
        <CreateKey />
        <KeyList />
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
        className="flex flex-col gap-3 sm:flex-row sm:items-end"
        onSubmit={(event) => {
          event.preventDefault();
          const name = String(new FormData(event.currentTarget).get('name') ?? '');
          setCreated(null);
          create.mutate({ name });
        }}
      >
        <TextField label="Key name" name="name" required maxLength={100} placeholder="e.g. production voice agent" className="flex-1" />
        <Button type="submit" pending={create.isPending}>
          Create key
        </Button>
      </form>
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
          <Button variant="ghost" className="mt-2 -ml-2" onClick={() => setCreated(null)}>
            Done, I have stored it
          </Button>
        </div>
      )}
    </Card>
  );
}

function KeyList() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const keys = useQuery(trpc.keys.list.queryOptions());
  const [target, setTarget] = useState<KeyRow | null>(null);
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
        <EmptyState title="No keys yet">Create one above to start calling the gateway.</EmptyState>
      ) : (
        <>
          <div className="hidden gap-4 border-b border-zinc-100 pb-2 text-xs font-semibold tracking-wide text-zinc-500 uppercase md:grid md:grid-cols-[minmax(0,1.4fr)_minmax(0,1fr)_6rem_minmax(0,1fr)_minmax(0,1fr)_6rem]" aria-hidden="true">
            <span>Name</span>
            <span>Key</span>
            <span>Status</span>
            <span>Created</span>
            <span>Last used</span>
            <span className="sr-only">Actions</span>
          </div>
          <ul className="divide-y divide-zinc-100" aria-label="API keys">
            {keys.data.map((k) => (
              <li key={k.id} data-testid="key-row" data-key-id={k.id} className="grid grid-cols-[minmax(0,1fr)_auto] items-center gap-x-4 gap-y-1 py-3 md:grid-cols-[minmax(0,1.4fr)_minmax(0,1fr)_6rem_minmax(0,1fr)_minmax(0,1fr)_6rem]">
                <span className="truncate font-medium text-zinc-900" title={k.name}>
                  {k.name || <span className="text-zinc-500">(unnamed)</span>}
                  {k.isTrial && <span className="ml-2 align-middle"><Badge tone="amber">Trial</Badge></span>}
                </span>
                <span className="order-3 col-span-2 font-mono text-sm text-zinc-700 md:order-none md:col-span-1">
                  <span className="sr-only">Key prefix </span>
                  {k.prefix}…
                </span>
                <span className="justify-self-end md:justify-self-start" data-testid="key-status">
                  <Badge tone={k.status === 'active' ? 'green' : 'gray'}>{k.status === 'active' ? 'Active' : 'Revoked'}</Badge>
                </span>
                <span className="order-4 col-span-2 text-sm text-zinc-600 md:order-none md:col-span-1">
                  <span className="md:sr-only">Created </span>
                  {formatDateTime(k.createdAt)}
                </span>
                <span className="order-5 text-sm text-zinc-600 md:order-none">
                  <span className="md:sr-only">Last used </span>
                  {formatDateTime(k.lastUsedAt, 'Never')}
                </span>
                <span className="order-6 justify-self-end md:order-none">
                  {k.status === 'active' ? (
                    <Button
                      variant="secondary"
                      className="min-h-8 px-3 py-1"
                      onClick={() => {
                        revoke.reset();
                        setTarget(k);
                      }}
                      aria-label={`Revoke key ${k.name || k.prefix}`}
                    >
                      Revoke
                    </Button>
                  ) : (
                    <span className="text-xs text-zinc-500">{k.revokedAt ? `Revoked ${formatDateTime(k.revokedAt)}` : ''}</span>
                  )}
                </span>
              </li>
            ))}
          </ul>
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
        <p>
          <span className="font-semibold">{target?.name || '(unnamed)'}</span> <span className="font-mono">({target?.prefix}…)</span> will stop working immediately: every request with it will
          be refused. This cannot be undone.
        </p>
      </ConfirmDialog>
    </Card>
  );
}
