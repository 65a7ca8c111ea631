'use client';
// Phone numbers' tokens (docs/phone.md): a carrier's stream URL ends in one, in place of a key.
// Owners make them (the token shown once, with the URL to paste into the carrier) and revoke
// them (the number's calls end within a second); members see the list.
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Button } from '@/app/_components/button';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { ConfirmDialog } from '@/app/_components/confirm-dialog';
import { CopyButton } from '@/app/_components/copy-button';
import { SelectField } from '@/app/_components/fields';
import { LoadingBlock } from '@/app/_components/spinner';
import { TextField } from '@/app/_components/text-field';
import type { RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, formatDateTime } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';

type TokenRow = RouterOutputs['phone']['list'][number];

/** The stream URL a carrier connects to: the gateway's address as a WebSocket one, the token as the last segment (none: it goes in the stream's parameters). */
export function streamUrl(gatewayUrl: string, carrier: 'twilio' | 'telnyx' | 'plivo' | 'exotel' | 'vonage', token?: string): string {
  return `${gatewayUrl.replace(/^http/, 'ws').replace(/\/+$/, '')}/phone/${carrier}${token ? `/${token}` : ''}`;
}

export function PhoneTokens() {
  const trpc = useTRPC();
  const canManage = useQuery(trpc.account.me.queryOptions()).data?.canManage;
  return (
    <>
      <PageHeader
        title="Phone"
        description="Phone carriers (Twilio, Telnyx, Plivo, Exotel, Vonage) stream a call's audio to the gateway and cannot send a key: their stream URL ends in a token (or their stream carries it as a parameter) that stands for one of your keys and names the realtime profile the caller talks to."
      />
      <div className="space-y-6">
        {canManage === true && <CreateToken />}
        <TokenList canRevoke={canManage === true} />
      </div>
    </>
  );
}

function CreateToken() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const formRef = useRef<HTMLFormElement>(null);
  // The full token lives only here until "Done": it is never stored and cannot be fetched again.
  const [created, setCreated] = useState<{ name: string; token: string } | null>(null);
  const keys = useQuery(trpc.keys.list.queryOptions());
  const gatewayUrl = useQuery(trpc.account.overview.queryOptions()).data?.gatewayUrl;
  const create = useMutation(
    trpc.phone.create.mutationOptions({
      onSuccess: (data) => {
        setCreated({ name: data.name, token: data.token });
        formRef.current?.reset();
        void queryClient.invalidateQueries({ queryKey: trpc.phone.list.queryKey() });
      },
    }),
  );
  const activeKeys = keys.data?.filter((k) => k.status === 'active') ?? [];
  const url = created && gatewayUrl ? streamUrl(gatewayUrl, 'twilio', created.token) : null;
  const urlWithoutToken = gatewayUrl ? streamUrl(gatewayUrl, 'twilio') : null;

  return (
    <Card title="Create a phone token" description="One per phone number: its calls are admitted, billed and logged as the key you choose.">
      <form
        ref={formRef}
        className="grid gap-3 sm:grid-cols-[1fr_1fr_1fr_auto] sm:items-end"
        onSubmit={(event) => {
          event.preventDefault();
          const form = new FormData(event.currentTarget);
          setCreated(null);
          create.mutate({ name: String(form.get('name') ?? ''), apiKeyId: String(form.get('apiKeyId') ?? ''), profile: String(form.get('profile') ?? '') });
        }}
      >
        <TextField label="Name" name="name" required maxLength={100} placeholder="e.g. +1 555 0100" />
        <SelectField label="Billed to key" name="apiKeyId" required defaultValue="">
          <option value="" disabled>
            {keys.isPending ? 'Loading keys…' : activeKeys.length ? 'Choose a key' : 'No active key: create one first'}
          </option>
          {activeKeys.map((k) => (
            <option key={k.id} value={k.id}>
              {k.name || '(unnamed)'} ({k.prefix}…)
            </option>
          ))}
        </SelectField>
        <TextField label="Realtime profile" name="profile" required maxLength={128} defaultValue="local-realtime" hint="Or an LLM of the registry." />
        <Button type="submit" pending={create.isPending}>
          Create token
        </Button>
      </form>
      {create.error && (
        <div className="mt-3">
          <Alert>{errorMessage(create.error)}</Alert>
        </div>
      )}
      {created && (
        <div role="status" aria-live="polite" className="mt-4 rounded-md border border-emerald-200 bg-emerald-50 p-4" data-testid="new-phone-token-panel">
          <p className="text-sm font-semibold text-emerald-900">Token “{created.name}” created</p>
          <p className="mt-1 text-sm text-emerald-900">Copy it now: it will not be shown again.</p>
          <div className="mt-3 flex flex-col gap-2 sm:flex-row">
            <input
              readOnly
              aria-label="New phone token"
              value={created.token}
              data-testid="new-phone-token"
              onFocus={(e) => e.currentTarget.select()}
              className="block w-full min-w-0 rounded-md border-0 bg-white px-3 py-2 font-mono text-sm text-zinc-900 ring-1 ring-emerald-300 ring-inset"
            />
            <CopyButton value={created.token} />
          </div>
          {url && (
            <div className="mt-3 text-sm text-emerald-900">
              <p className="font-semibold">Twilio: the number&apos;s TwiML</p>
              <pre className="mt-1 overflow-x-auto rounded bg-white p-2 font-mono text-xs text-zinc-900 ring-1 ring-emerald-200" data-testid="phone-twiml">
                {`<Response><Connect><Stream url="${url}"/></Connect></Response>`}
              </pre>
              <p className="mt-2 font-semibold">Or with the token out of the URL (the stream&apos;s parameter svc_token)</p>
              <pre
                className="mt-1 overflow-x-auto rounded bg-white p-2 font-mono text-xs text-zinc-900 ring-1 ring-emerald-200"
                data-testid="phone-twiml-parameter"
              >
                {`<Response><Connect><Stream url="${urlWithoutToken}"><Parameter name="svc_token" value="${created.token}"/></Stream></Connect></Response>`}
              </pre>
              <p className="mt-1">
                Telnyx, Plivo, Exotel, Vonage: the same URLs with /phone/telnyx, /phone/plivo, /phone/exotel or /phone/vonage. Set-up per carrier (Plivo&apos;s
                XML, Exotel&apos;s applet, Vonage&apos;s NCCO, where each puts svc_token): docs/phone.md.
              </p>
            </div>
          )}
          <Button variant="ghost" className="mt-2 -ml-2" onClick={() => setCreated(null)}>
            Done, I have stored it
          </Button>
        </div>
      )}
    </Card>
  );
}

function TokenList({ canRevoke }: { canRevoke: boolean }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const tokens = useQuery(trpc.phone.list.queryOptions());
  const [target, setTarget] = useState<TokenRow | null>(null);
  const revoke = useMutation(
    trpc.phone.revoke.mutationOptions({
      onSuccess: () => {
        setTarget(null);
        void queryClient.invalidateQueries({ queryKey: trpc.phone.list.queryKey() });
      },
    }),
  );

  return (
    <Card title="Phone tokens">
      {tokens.isPending ? (
        <LoadingBlock label="Loading phone tokens" />
      ) : tokens.isError ? (
        <Alert title="Could not load the phone tokens" onRetry={() => void tokens.refetch()}>
          {errorMessage(tokens.error)}
        </Alert>
      ) : tokens.data.length === 0 ? (
        <EmptyState title="No phone tokens yet">
          {canRevoke ? 'Create one above for each phone number.' : 'An owner of this organization can create one.'}
        </EmptyState>
      ) : (
        <ul className="divide-y divide-zinc-100" aria-label="Phone tokens">
          {tokens.data.map((t) => (
            <li key={t.id} data-testid="phone-token-row" className="flex flex-wrap items-center gap-x-4 gap-y-1 py-3">
              <span className="min-w-0 flex-1">
                <span className="font-medium break-words text-zinc-900">{t.name || '(unnamed)'}</span>
                <span className="ml-2 font-mono text-sm text-zinc-600">{t.prefix}…</span>
                <span className="block text-xs text-zinc-500">
                  Profile <span className="font-mono">{t.profile}</span>; billed to {t.apiKeyName || '(unnamed)'} ({t.apiKeyPrefix}…); created{' '}
                  {formatDateTime(t.createdAt)}; last call {formatDateTime(t.lastUsedAt, 'never')}
                </span>
              </span>
              <Badge tone={t.status === 'active' ? 'green' : 'gray'}>{t.status === 'active' ? 'Active' : 'Revoked'}</Badge>
              {t.status === 'active' && t.revokedAt === null && canRevoke && (
                <Button
                  variant="secondary"
                  className="min-h-8 px-3 py-1"
                  aria-label={`Revoke phone token ${t.name || t.prefix}`}
                  onClick={() => {
                    revoke.reset();
                    setTarget(t);
                  }}
                >
                  Revoke
                </Button>
              )}
            </li>
          ))}
        </ul>
      )}
      <ConfirmDialog
        open={target !== null}
        title="Revoke this phone token?"
        confirmLabel="Revoke token"
        pending={revoke.isPending}
        error={revoke.error ? errorMessage(revoke.error) : null}
        onCancel={() => setTarget(null)}
        onConfirm={() => target && revoke.mutate({ id: target.id })}
      >
        <p className="[overflow-wrap:anywhere]">
          Calls to <span className="font-semibold">{target?.name || '(unnamed)'}</span> will be refused, and calls in progress end within a second. This cannot
          be undone.
        </p>
      </ConfirmDialog>
    </Card>
  );
}
