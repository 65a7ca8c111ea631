'use client';
import { useQuery } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { Button } from '@/app/_components/button';
import { useTRPC } from '@/app/_lib/trpc';
import { ORG_COOKIE } from '@/server/api/org-cookie';

/** Sets the org the dashboard acts for; a year, as a preference. The server checks membership on every call. */
export function chooseOrg(orgId: string) {
  const secure = window.location.protocol === 'https:' ? '; Secure' : '';
  document.cookie = `${ORG_COOKIE}=${encodeURIComponent(orgId)}; Path=/; Max-Age=31536000; SameSite=Lax${secure}`;
}

/**
 * The org the dashboard acts for, and a switch between the user's orgs when there are several.
 * Choosing is separate from switching (a button), so arrowing through the list with the
 * keyboard does not switch at every step. Switching reloads the page: every query, server
 * component and the gateway proxy then act for the new org, nothing of the old one cached.
 */
export function OrgSwitcher() {
  const trpc = useTRPC();
  const mine = useQuery(trpc.orgs.mine.queryOptions());
  const id = useId();
  const [switching, setSwitching] = useState(false);
  const [chosen, setChosen] = useState<string | null>(null);
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
  const selected = chosen ?? activeOrgId ?? '';
  return (
    <form
      className="flex min-w-0 items-center gap-2"
      aria-label="Switch organization"
      onSubmit={(e) => {
        e.preventDefault();
        if (!selected || selected === activeOrgId) return;
        setSwitching(true);
        chooseOrg(selected);
        window.location.reload();
      }}
    >
      <label htmlFor={id} className="sr-only">
        Organization
      </label>
      <select
        id={id}
        value={selected}
        disabled={switching}
        data-testid="org-switcher"
        onChange={(e) => setChosen(e.target.value)}
        className="max-w-44 min-w-0 truncate rounded-md border-0 bg-white py-1.5 pr-8 pl-2 text-sm font-medium text-zinc-900 ring-1 ring-zinc-300 ring-inset focus:ring-2 focus:ring-indigo-600 focus:outline-none sm:max-w-64"
      >
        {orgs.map((o) => (
          <option key={o.id} value={o.id}>
            {o.name} ({o.role})
          </option>
        ))}
      </select>
      {selected !== activeOrgId && (
        <Button type="submit" variant="secondary" pending={switching} className="min-h-8 px-3 py-1" data-testid="org-switch">
          Switch
        </Button>
      )}
    </form>
  );
}
