'use client';
import { useQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { Spinner } from '@/app/_components/spinner';
import { useTRPC } from '@/app/_lib/trpc';
import { ORG_COOKIE } from '@/server/api/org-cookie';

/** Sets the org the dashboard acts for; a year, as a preference. The server checks membership on every call. */
export function chooseOrg(orgId: string) {
  const secure = window.location.protocol === 'https:' ? '; Secure' : '';
  document.cookie = `${ORG_COOKIE}=${encodeURIComponent(orgId)}; Path=/; Max-Age=31536000; SameSite=Lax${secure}`;
}

/**
 * The org the dashboard acts for, and a switch between the user's orgs when there are several.
 * Choosing an org switches to it at once (a separate "Switch" click left the header naming one
 * org while the page showed another). Switching reloads the page: every query, server
 * component and the gateway proxy then act for the new org, nothing of the old one cached.
 */
export function OrgSwitcher() {
  const trpc = useTRPC();
  const mine = useQuery(trpc.orgs.mine.queryOptions());
  const id = useId();
  const [switchingTo, setSwitchingTo] = useState<string | null>(null);
  if (!mine.data) return null;
  const { orgs, activeOrgId } = mine.data;
  const active = orgs.find((o) => o.id === activeOrgId);
  if (orgs.length <= 1) {
    return active ? (
      <span className="max-w-48 truncate text-sm font-medium text-zinc-800" title={active.name} data-testid="active-org">
        {active.name}
      </span>
    ) : null;
  }
  const target = orgs.find((o) => o.id === switchingTo);
  return (
    <div className="flex min-w-0 items-center gap-2">
      <label htmlFor={id} className="sr-only">
        Organization
      </label>
      <select
        id={id}
        value={switchingTo ?? activeOrgId ?? ''}
        disabled={switchingTo !== null}
        data-testid="org-switcher"
        onChange={(e) => {
          const chosen = e.target.value;
          if (!chosen || chosen === activeOrgId) return;
          setSwitchingTo(chosen);
          chooseOrg(chosen);
          window.location.reload();
        }}
        className="max-w-44 min-w-0 truncate rounded-md border-0 bg-white py-1.5 pr-8 pl-2 text-sm font-medium text-zinc-900 ring-1 ring-zinc-300 ring-inset focus:ring-2 focus:ring-indigo-600 focus:outline-none disabled:text-zinc-500 sm:max-w-64"
      >
        {orgs.map((o) => (
          <option key={o.id} value={o.id}>
            {o.name} ({o.role})
          </option>
        ))}
      </select>
      {target && (
        <span role="status" className="flex items-center gap-1 text-xs text-zinc-600">
          <Spinner className="size-3.5" />
          <span className="sr-only">Switching to {target.name}…</span>
        </span>
      )}
    </div>
  );
}
