'use client';
import { useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { usePathname } from 'next/navigation';
import { useTRPC } from '@/app/_lib/trpc';
import { navItemsFor } from './nav-items';

export function Nav() {
  const pathname = usePathname();
  const trpc = useTRPC();
  const me = useQuery(trpc.account.me.queryOptions());
  const isPlatformAdmin = me.data?.user.isPlatformAdmin ?? false;
  const isActive = (href: string) => (href === '/' ? pathname === '/' : pathname === href || pathname.startsWith(`${href}/`));
  return (
    <nav aria-label="Main" className="-mb-px flex flex-col gap-0 pb-2 sm:flex-row sm:gap-1 sm:overflow-x-auto sm:pb-0">
      {navItemsFor(isPlatformAdmin).map((item) => {
        const active = isActive(item.href);
        return (
          <Link
            key={item.href}
            href={item.href}
            aria-current={active ? 'page' : undefined}
            className={`shrink-0 border-l-2 px-3 py-2.5 text-sm sm:border-b-2 sm:border-l-0 sm:py-3 font-medium whitespace-nowrap ${active ? 'border-indigo-600 text-indigo-700' : 'border-transparent text-zinc-600 hover:border-zinc-300 hover:text-zinc-900'}`}
          >
            {item.label}
          </Link>
        );
      })}
    </nav>
  );
}
