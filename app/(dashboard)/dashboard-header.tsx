'use client';
import Link from 'next/link';
import { usePathname } from 'next/navigation';
import { useEffect, useId, useState } from 'react';
import { Nav } from './nav';
import { NewOrgButton } from './new-org-button';
import { OrgSwitcher } from './org-switcher';
import { SignOutButton } from './sign-out-button';

/**
 * The header. Wide: the name, the org and account on one row, the pages in a row below. On a
 * phone one row (the name and a "Menu" button) that opens the pages, the org and the account as
 * a list; a phone's row of nine pages ran off the screen with no cue that it scrolled.
 */
export function DashboardHeader({ email }: { email: string }) {
  const [open, setOpen] = useState(false);
  const pathname = usePathname();
  const menuId = useId();
  // A page chosen from the menu closes it.
  useEffect(() => setOpen(false), [pathname]);
  return (
    <header className="border-b border-zinc-200 bg-white">
      <div className="mx-auto flex max-w-5xl flex-wrap items-center justify-between gap-x-4 gap-y-2 px-4 py-2 sm:pt-3 sm:pb-0">
        <Link href="/" className="text-lg font-bold tracking-tight text-indigo-700">
          svc
        </Link>
        <button
          type="button"
          aria-expanded={open}
          aria-controls={menuId}
          onClick={() => setOpen((o) => !o)}
          className="inline-flex min-h-10 items-center gap-2 rounded-md px-3 text-sm font-semibold text-zinc-800 ring-1 ring-zinc-300 ring-inset hover:bg-zinc-50 sm:hidden"
        >
          <svg aria-hidden="true" viewBox="0 0 20 20" className="size-4" fill="currentColor">
            {open ? (
              <path d="M5.3 4.3a1 1 0 0 1 1.4 0L10 7.6l3.3-3.3a1 1 0 1 1 1.4 1.4L11.4 9l3.3 3.3a1 1 0 0 1-1.4 1.4L10 10.4l-3.3 3.3a1 1 0 0 1-1.4-1.4L8.6 9 5.3 5.7a1 1 0 0 1 0-1.4Z" />
            ) : (
              <path d="M3 5h14v2H3V5Zm0 4h14v2H3V9Zm0 4h14v2H3v-2Z" />
            )}
          </svg>
          Menu
        </button>
        <div
          id={menuId}
          className={`${open ? 'flex' : 'hidden'} w-full min-w-0 flex-col items-stretch gap-2 border-t border-zinc-100 pt-2 sm:flex sm:w-auto sm:flex-row sm:flex-wrap sm:items-center sm:justify-end sm:gap-x-3 sm:gap-y-1 sm:border-0 sm:pt-0`}
        >
          <div className="flex min-w-0 flex-wrap items-center gap-2">
            <OrgSwitcher />
            <NewOrgButton />
          </div>
          <div className="flex min-w-0 items-center justify-between gap-3">
            <span className="truncate text-sm text-zinc-600" title={email}>
              {email}
            </span>
            <SignOutButton />
          </div>
        </div>
      </div>
      <div className={`${open ? 'block' : 'hidden'} mx-auto max-w-5xl px-2 sm:block sm:px-4`}>
        <Nav />
      </div>
    </header>
  );
}
