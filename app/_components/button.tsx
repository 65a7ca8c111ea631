import type { ButtonHTMLAttributes, Ref } from 'react';
import { Spinner } from './spinner';

const VARIANTS = {
  primary: 'bg-indigo-600 text-white shadow-xs hover:bg-indigo-500 disabled:bg-indigo-300',
  secondary: 'bg-white text-zinc-900 shadow-xs ring-1 ring-inset ring-zinc-300 hover:bg-zinc-50 disabled:text-zinc-400',
  danger: 'bg-red-600 text-white shadow-xs hover:bg-red-500 disabled:bg-red-300',
  ghost: 'text-zinc-700 hover:bg-zinc-100 disabled:text-zinc-400',
} as const;

export interface ButtonProps extends ButtonHTMLAttributes<HTMLButtonElement> {
  variant?: keyof typeof VARIANTS;
  /** Shows a spinner and disables the button while an action runs. */
  pending?: boolean;
  /** The <button> itself (React 19 passes a ref as a prop), e.g. to give it the focus back. */
  ref?: Ref<HTMLButtonElement>;
}

export function Button({ variant = 'primary', pending = false, disabled, className = '', children, type = 'button', ...rest }: ButtonProps) {
  return (
    <button
      type={type}
      disabled={disabled || pending}
      aria-busy={pending || undefined}
      className={`inline-flex min-h-10 items-center justify-center gap-2 rounded-md px-4 py-2 text-sm font-semibold transition-colors disabled:cursor-not-allowed ${VARIANTS[variant]} ${className}`}
      {...rest}
    >
      {pending && <Spinner className="size-4" />}
      {children}
    </button>
  );
}
