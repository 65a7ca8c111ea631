'use client';
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Button } from '@/app/_components/button';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { ConfirmDialog } from '@/app/_components/confirm-dialog';
import { LoadingBlock } from '@/app/_components/spinner';
import { TextField } from '@/app/_components/text-field';
import type { RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, formatDateTime, usd } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';

const PAGE_SIZE = 20;

const KIND_LABELS = { grant: 'Grant', usage: 'Usage', refund: 'Refund', transfer: 'Transfer', adjustment: 'Adjustment' } as const;

export function CreditsView() {
  const trpc = useTRPC();
  const me = useQuery(trpc.account.me.queryOptions());
  return (
    <>
      <PageHeader title="Credits" description="Prepaid USD credit. Every change to the balance is one row in the ledger." />
      <div className="space-y-6">
        <Ledger />
        {me.data?.user.isPlatformAdmin && <GrantCredits currentOrg={me.data.org} />}
      </div>
    </>
  );
}

function Ledger() {
  const trpc = useTRPC();
  // Cursors of the pages seen so far: [null] is the newest page; "Older" pushes, "Newer" pops.
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const cursor = cursors[cursors.length - 1] ?? null;
  const page = useQuery({ ...trpc.credits.ledger.queryOptions({ cursor, limit: PAGE_SIZE }), placeholderData: keepPreviousData });
  const pageIndex = cursors.length - 1;

  if (page.isPending) return <LoadingBlock label="Loading ledger" lines={5} />;
  if (page.isError) {
    return (
      <Alert title="Could not load the ledger" onRetry={() => (cursors.length > 1 ? setCursors([null]) : void page.refetch())}>
        {errorMessage(page.error)}
      </Alert>
    );
  }
  const { balanceUsd, entries, nextCursor, total } = page.data;
  const from = pageIndex * PAGE_SIZE + 1;
  return (
    <>
      <Card title="Balance">
        <p className="font-mono text-3xl font-semibold tracking-tight" data-testid="credits-balance">
          {usd(balanceUsd)}
        </p>
        <p className="mt-1 text-sm text-zinc-600">USD available to your organization&apos;s keys.</p>
      </Card>
      <Card title="Ledger" description="Newest first.">
        {entries.length === 0 ? (
          <EmptyState title="No ledger entries yet">Grants and metered usage will appear here.</EmptyState>
        ) : (
          <>
            <div className="overflow-x-auto">
              <table className="w-full text-left text-sm" aria-busy={page.isFetching || undefined}>
                <caption className="sr-only">Ledger entries, newest first</caption>
                <thead className="border-b border-zinc-200 text-xs tracking-wide text-zinc-500 uppercase">
                  <tr>
                    <th scope="col" className="hidden py-2 pr-4 font-semibold sm:table-cell">
                      Date
                    </th>
                    <th scope="col" className="hidden px-4 py-2 font-semibold md:table-cell">
                      Type
                    </th>
                    <th scope="col" className="py-2 pr-4 font-semibold sm:px-4">
                      Description
                    </th>
                    <th scope="col" className="py-2 pl-4 text-right font-semibold sm:px-4">
                      Amount
                    </th>
                    <th scope="col" className="hidden py-2 pl-4 text-right font-semibold sm:table-cell">
                      Balance after
                    </th>
                  </tr>
                </thead>
                <tbody className="divide-y divide-zinc-100">
                  {entries.map((e) => (
                    <tr key={e.id} data-testid="ledger-row">
                      <td className="hidden py-2.5 pr-4 whitespace-nowrap text-zinc-600 sm:table-cell">{formatDateTime(e.createdAt)}</td>
                      <td className="hidden px-4 py-2.5 md:table-cell">
                        <Badge tone={e.kind === 'usage' ? 'gray' : e.kind === 'grant' ? 'green' : 'indigo'}>{KIND_LABELS[e.kind]}</Badge>
                      </td>
                      {/* The description takes the room the figures leave and wraps (a cut-off line hid what the entry was). */}
                      <td className="w-full py-2.5 pr-4 text-zinc-700 sm:px-4">
                        <p className="[overflow-wrap:anywhere]" data-testid="ledger-description">
                          {e.description || '—'}
                        </p>
                        {/* On narrow screens the date and type columns fold in here. */}
                        <p className="text-xs text-zinc-500 sm:hidden">
                          {formatDateTime(e.createdAt)} · {KIND_LABELS[e.kind]}
                        </p>
                        <p className="hidden text-xs text-zinc-500 sm:block md:hidden">{KIND_LABELS[e.kind]}</p>
                      </td>
                      <td
                        className={`py-2.5 pl-4 text-right font-mono whitespace-nowrap sm:px-4 ${e.amountUsd.startsWith('-') ? 'text-zinc-900' : 'text-emerald-700'}`}
                      >
                        {e.amountUsd.startsWith('-') ? usd(e.amountUsd) : `+${usd(e.amountUsd)}`}
                      </td>
                      <td className="hidden py-2.5 pl-4 text-right font-mono whitespace-nowrap text-zinc-700 sm:table-cell">{usd(e.balanceAfterUsd)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <nav aria-label="Ledger pages" className="mt-4 flex flex-wrap items-center justify-between gap-3">
              <p className="text-sm text-zinc-600" aria-live="polite">
                {from}–{from + entries.length - 1} of {total}
              </p>
              <div className="flex gap-2">
                <Button variant="secondary" disabled={pageIndex === 0 || page.isFetching} onClick={() => setCursors((c) => c.slice(0, -1))}>
                  ← Newer
                </Button>
                <Button variant="secondary" disabled={!nextCursor || page.isFetching} onClick={() => nextCursor && setCursors((c) => [...c, nextCursor])}>
                  Older →
                </Button>
              </div>
            </nav>
          </>
        )}
      </Card>
    </>
  );
}

function GrantCredits({ currentOrg }: { currentOrg: RouterOutputs['account']['me']['org'] }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [search, setSearch] = useState('');
  const [orgId, setOrgId] = useState(currentOrg.id);
  const [done, setDone] = useState<string | null>(null);
  // A negative amount removes credit: sent only as an explicit adjustment, after a confirmation.
  const [removal, setRemoval] = useState<{ amountUsd: string; description?: string } | null>(null);
  const formRef = useRef<HTMLFormElement>(null);
  const orgs = useQuery({ ...trpc.credits.orgs.queryOptions({ query: search.trim() || undefined }), placeholderData: keepPreviousData });
  const grant = useMutation(
    trpc.credits.grant.mutationOptions({
      onSuccess: (result, input) => {
        setRemoval(null);
        // Amount and note are cleared, so a second click cannot grant the same credit again
        // (the organization stays chosen: it is React's state, not the form's).
        clearFields(formRef.current, ['amount', 'description']);
        const name = orgs.data?.find((o) => o.id === result.orgId)?.name ?? result.orgId;
        const amount = input.amountUsd;
        setDone(
          `${amount.startsWith('-') ? `Removed ${usd(amount.slice(1))} from` : `Granted ${usd(amount)} to`} ${name}. New balance: ${usd(result.balanceUsd)}.`,
        );
        void queryClient.invalidateQueries({ queryKey: trpc.credits.pathKey() });
        void queryClient.invalidateQueries({ queryKey: trpc.account.overview.queryKey() });
      },
    }),
  );
  const options = orgs.data ?? [];
  const selectedKnown = options.some((o) => o.id === orgId);

  return (
    <Card
      title="Grant credits"
      description={<>Platform admin: add credit to any organization (a negative amount removes it, after a confirmation).</>}
      actions={<Badge tone="indigo">Admin</Badge>}
    >
      <form
        ref={formRef}
        id="grant"
        className="grid scroll-mt-4 gap-4 sm:grid-cols-2"
        onSubmit={(event) => {
          event.preventDefault();
          const form = new FormData(event.currentTarget);
          setDone(null);
          const description = String(form.get('description') ?? '').trim();
          const amountUsd = String(form.get('amount') ?? '').trim();
          if (amountUsd.startsWith('-')) setRemoval({ amountUsd, ...(description ? { description } : {}) });
          else grant.mutate({ orgId, amountUsd, ...(description ? { description } : {}) });
        }}
      >
        <TextField
          label="Find an organization"
          type="search"
          value={search}
          onChange={(e) => setSearch(e.target.value)}
          placeholder="Name or exact id"
          hint="Leave empty to list the newest organizations."
        />
        <div>
          <label htmlFor="grant-org" className="block text-sm font-medium text-zinc-900">
            Organization
          </label>
          <select
            id="grant-org"
            name="orgId"
            value={orgId}
            onChange={(e) => setOrgId(e.target.value)}
            className="mt-1 block w-full rounded-md border-0 bg-white px-3 py-2 text-base text-zinc-900 ring-1 ring-zinc-300 ring-inset focus:ring-2 focus:ring-indigo-600 focus:outline-none sm:text-sm"
          >
            {!selectedKnown && <option value={orgId}>{orgId === currentOrg.id ? `${currentOrg.name} (yours)` : orgId}</option>}
            {options.map((o) => (
              <option key={o.id} value={o.id}>
                {o.name}
                {o.id === currentOrg.id ? ' (yours)' : ''} · {usd(o.balanceUsd)} · {o.id}
              </option>
            ))}
          </select>
          {orgs.isError && <p className="mt-1 text-xs text-red-700">Could not load organizations: {errorMessage(orgs.error)}</p>}
        </div>
        <TextField
          label="Amount (USD)"
          name="amount"
          inputMode="decimal"
          required
          placeholder="10.00"
          pattern="-?[0-9]{1,12}(\.[0-9]{1,6})?"
          hint="Up to 6 decimals."
        />
        <TextField label="Note (optional)" name="description" maxLength={200} placeholder="e.g. pilot credit" />
        <div className="flex flex-col gap-3 sm:col-span-2">
          {grant.error && !removal && <Alert>{errorMessage(grant.error)}</Alert>}
          {done && <Alert tone="success">{done}</Alert>}
          <div>
            <Button type="submit" pending={grant.isPending}>
              Grant credits
            </Button>
          </div>
        </div>
      </form>
      <ConfirmDialog
        open={removal !== null}
        title="Remove credit?"
        confirmLabel="Remove credit"
        pending={grant.isPending}
        error={removal && grant.error ? errorMessage(grant.error) : null}
        onCancel={() => {
          setRemoval(null);
          grant.reset();
        }}
        onConfirm={() => removal && grant.mutate({ orgId, ...removal, adjustment: true })}
      >
        This takes {removal ? usd(removal.amountUsd.slice(1)) : ''} from{' '}
        {options.find((o) => o.id === orgId)?.name ?? (orgId === currentOrg.id ? currentOrg.name : orgId)}. Its ledger records it as an adjustment, with your
        email.
      </ConfirmDialog>
    </Card>
  );
}

/** Empties the named inputs of a form whose other fields React controls (form.reset() would fight them). */
export function clearFields(form: HTMLFormElement | null, names: string[]): void {
  for (const name of names) {
    const field = form?.elements.namedItem(name);
    if (field instanceof HTMLInputElement) field.value = '';
  }
}

/** Why an amount typed in a grant box is not credit to add (the server says the same), or null. */
export function positiveAmountError(amountUsd: string): string | null {
  if (!/^-?\d{1,12}(\.\d{1,6})?$/.test(amountUsd)) return 'Enter an amount in USD, e.g. 5 or 2.50.';
  return Number(amountUsd) > 0 ? null : 'Enter an amount above zero.';
}
