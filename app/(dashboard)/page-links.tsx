'use client';
import { useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { useTRPC } from '@/app/_lib/trpc';
import { navItemsFor } from './nav-items';

/** The signed-in 404 page's way on: the header's own pages (Models too for a platform admin). */
export function PageLinks() {
  const trpc = useTRPC();
  const me = useQuery(trpc.account.me.queryOptions());
  return (
    <>
      {navItemsFor(me.data?.user.isPlatformAdmin ?? false).map((item) => (
        <li key={item.href}>
          <PageLink href={item.href} label={item.label} />
        </li>
      ))}
    </>
  );
}

export function PageLink({ href, label }: { href: string; label: string }) {
  return (
    <Link
      href={href}
      className="block rounded-md border border-zinc-200 bg-white px-4 py-3 text-sm font-semibold text-indigo-700 shadow-xs hover:border-indigo-300 hover:bg-indigo-50 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-600"
    >
      {label} →
    </Link>
  );
}
