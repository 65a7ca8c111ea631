'use client';
import { useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { usePathname } from 'next/navigation';
import { useTRPC } from '@/app/_lib/trpc';
import { NAV_ITEMS } from './nav-items';

export function Nav() {
  const pathname = usePathname();
  const trpc = useTRPC();
  const me = useQuery(trpc.account.me.queryOptions());
  const isPlatformAdmin = me.data?.user.isPlatformAdmin ?? false;
  const isActive = (href: string) => (href === '/' ? pathname === '/' : pathname === href || pathname.startsWith(`${href}/`));
  return (
    <nav aria-label="Main" className="-mb-px flex gap-1 overflow-x-auto">
      {NAV_ITEMS.filter((item) => !item.adminOnly || isPlatformAdmin).map((item) => {
        const active = isActive(item.href);
        return (
          <Link
            key={item.href}
            href={item.href}
            aria-current={active ? 'page' : undefined}
            className={`shrink-0 border-b-2 px-3 py-3 text-sm font-medium whitespace-nowrap ${active ? 'border-indigo-600 text-indigo-700' : 'border-transparent text-zinc-600 hover:border-zinc-300 hover:text-zinc-900'}`}
          >
            {item.label}
          </Link>
        );
      })}
    </nav>
  );
}
