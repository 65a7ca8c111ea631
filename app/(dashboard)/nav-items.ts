// The dashboard's navigation. A new page joins the nav with one line here.
export interface NavItem {
  href: string;
  label: string;
  /** Shown to platform admins only (the page itself checks too). */
  adminOnly?: boolean;
}

export const NAV_ITEMS: readonly NavItem[] = [
  { href: '/', label: 'Overview' },
  { href: '/keys', label: 'API keys' },
  { href: '/phone', label: 'Phone' },
  { href: '/credits', label: 'Credits' },
  { href: '/dictionaries', label: 'Dictionaries' },
  { href: '/voices', label: 'Voices' },
  { href: '/playground', label: 'Playground' },
  { href: '/talk', label: 'Talk' },
  { href: '/usage', label: 'Usage' },
  { href: '/logs', label: 'Logs' },
  { href: '/members', label: 'Members' },
  { href: '/models', label: 'Models', adminOnly: true },
];

/** The pages a user is offered: the header's nav and the 404 page's list (one rule for both). */
export function navItemsFor(isPlatformAdmin: boolean): NavItem[] {
  return NAV_ITEMS.filter((item) => !item.adminOnly || isPlatformAdmin);
}
