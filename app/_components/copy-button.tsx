'use client';
import { useEffect, useState } from 'react';
import { Button } from './button';

/** Copies `value`; falls back to selecting the text where the Clipboard API is unavailable (plain http). */
export function CopyButton({ value, fallbackTarget, label = 'Copy' }: { value: string; fallbackTarget?: () => HTMLInputElement | null; label?: string }) {
  const [state, setState] = useState<'idle' | 'copied' | 'failed'>('idle');
  useEffect(() => {
    if (state === 'idle') return;
    const t = setTimeout(() => setState('idle'), 2500);
    return () => clearTimeout(t);
  }, [state]);

  async function copy() {
    try {
      await navigator.clipboard.writeText(value);
      setState('copied');
    } catch {
      const input = fallbackTarget?.();
      input?.select();
      setState(input && document.execCommand('copy') ? 'copied' : 'failed');
    }
  }

  return (
    <>
      <Button variant="secondary" onClick={copy} className="shrink-0">
        {state === 'copied' ? 'Copied' : label}
      </Button>
      <span role="status" aria-live="polite" className="sr-only">
        {state === 'copied' ? 'Copied to clipboard' : state === 'failed' ? 'Copy failed; the text is selected, press Ctrl+C' : ''}
      </span>
    </>
  );
}
