export function Card({
  title,
  description,
  actions,
  children,
  className = '',
}: {
  title?: string;
  description?: React.ReactNode;
  actions?: React.ReactNode;
  children: React.ReactNode;
  className?: string;
}) {
  const headingId = title ? `card-${title.toLowerCase().replace(/[^a-z0-9]+/g, '-')}` : undefined;
  return (
    <section aria-labelledby={headingId} className={`rounded-lg border border-zinc-200 bg-white shadow-xs ${className}`}>
      {(title || actions) && (
        <header className="flex flex-wrap items-start justify-between gap-3 border-b border-zinc-100 px-4 py-4 sm:px-6">
          <div className="min-w-0">
            {title && (
              <h2 id={headingId} className="text-base font-semibold text-zinc-900">
                {title}
              </h2>
            )}
            {description && <p className="mt-1 text-sm text-zinc-600">{description}</p>}
          </div>
          {actions}
        </header>
      )}
      <div className="px-4 py-4 sm:px-6">{children}</div>
    </section>
  );
}

export function PageHeader({ title, description, children }: { title: string; description?: React.ReactNode; children?: React.ReactNode }) {
  return (
    <div className="mb-6 flex flex-wrap items-end justify-between gap-4">
      <div className="min-w-0">
        <h1 className="text-2xl font-bold tracking-tight text-zinc-900">{title}</h1>
        {description && <p className="mt-1 text-sm text-zinc-600">{description}</p>}
      </div>
      {children}
    </div>
  );
}

export function EmptyState({ title, children }: { title: string; children?: React.ReactNode }) {
  return (
    <div className="rounded-md border border-dashed border-zinc-300 px-4 py-8 text-center">
      <p className="text-sm font-semibold text-zinc-900">{title}</p>
      {children && <div className="mt-1 text-sm text-zinc-600">{children}</div>}
    </div>
  );
}
