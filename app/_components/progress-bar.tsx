/** A labelled progress bar; value null is indeterminate (the work's length is unknown). */
export function ProgressBar({
  label,
  value,
  tone = 'indigo',
  testId,
}: {
  label: string;
  value: number | null;
  tone?: 'indigo' | 'green' | 'red';
  testId?: string;
}) {
  const percent = value === null ? null : Math.round(Math.min(Math.max(value, 0), 1) * 100);
  const color = tone === 'green' ? 'bg-emerald-500' : tone === 'red' ? 'bg-red-500' : 'bg-indigo-600';
  return (
    <div>
      <div className="flex items-center justify-between text-xs text-zinc-600">
        <span>{label}</span>
        {percent !== null && <span aria-hidden="true">{percent}%</span>}
      </div>
      <div
        role="progressbar"
        aria-label={label}
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={percent ?? undefined}
        data-testid={testId}
        className="mt-1 h-2 overflow-hidden rounded-full bg-zinc-200"
      >
        <div
          className={`h-full rounded-full ${color} ${percent === null ? 'w-1/3 animate-pulse' : 'transition-[width]'}`}
          style={percent === null ? undefined : { width: `${percent}%` }}
        />
      </div>
    </div>
  );
}
