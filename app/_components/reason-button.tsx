'use client';
import { useId } from 'react';
import { Button, type ButtonProps } from './button';

/**
 * A button that says why it cannot be used: while `reason` is set it is disabled and the reason
 * is shown beside it (and read with it: aria-describedby), rather than a grey button and a guess.
 */
export function ReasonButton({ reason, disabled, ...props }: ButtonProps & { reason: string | null }) {
  const id = useId();
  return (
    <div className="flex flex-wrap items-center gap-x-3 gap-y-1">
      <Button {...props} disabled={disabled || reason !== null} aria-describedby={reason ? id : undefined} />
      {reason && (
        <p id={id} className="text-sm text-zinc-600" data-testid="disabled-reason">
          {reason}
        </p>
      )}
    </div>
  );
}
