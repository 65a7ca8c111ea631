// The dashboard's navigation. A new page joins the nav with one line here.
export interface NavItem {
  href: string;
  label: string;
}

export const NAV_ITEMS: readonly NavItem[] = [
  { href: '/', label: 'Overview' },
  { href: '/keys', label: 'API keys' },
  { href: '/credits', label: 'Credits' },
  { href: '/dictionaries', label: 'Dictionaries' },
];
