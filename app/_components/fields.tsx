'use client';
import { useId, type SelectHTMLAttributes, type TextareaHTMLAttributes } from 'react';

const CONTROL =
  'mt-1 block w-full rounded-md border-0 bg-white px-3 py-2 text-base text-zinc-900 ring-1 ring-inset focus:ring-2 focus:ring-inset focus:ring-indigo-600 focus:outline-none disabled:bg-zinc-50 disabled:text-zinc-500 sm:text-sm';

function Described({ id, hint, error }: { id: string; hint?: React.ReactNode; error?: string | null }) {
  return (
    <>
      {hint && (
        <p id={`${id}-hint`} className="mt-1 text-xs text-zinc-500">
          {hint}
        </p>
      )}
      {error && (
        <p id={`${id}-error`} className="mt-1 text-xs text-red-700">
          {error}
        </p>
      )}
    </>
  );
}

const describedBy = (id: string, hint: unknown, error: unknown) =>
  [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;

export interface SelectFieldProps extends SelectHTMLAttributes<HTMLSelectElement> {
  label: string;
  hint?: React.ReactNode;
  error?: string | null;
}

/** A labelled native <select> (keyboard and screen readers for free). */
export function SelectField({ label, hint, error, id, className = '', children, ...rest }: SelectFieldProps) {
  const generated = useId();
  const selectId = id ?? generated;
  return (
    <div className={className}>
      <label htmlFor={selectId} className="block text-sm font-medium text-zinc-900">
        {label}
      </label>
      <select
        id={selectId}
        aria-invalid={error ? true : undefined}
        aria-describedby={describedBy(selectId, hint, error)}
        className={`${CONTROL} ${error ? 'ring-red-400' : 'ring-zinc-300'}`}
        {...rest}
      >
        {children}
      </select>
      <Described id={selectId} hint={hint} error={error} />
    </div>
  );
}

export interface TextAreaFieldProps extends TextareaHTMLAttributes<HTMLTextAreaElement> {
  label: string;
  hint?: React.ReactNode;
  error?: string | null;
}

export function TextAreaField({ label, hint, error, id, className = '', ...rest }: TextAreaFieldProps) {
  const generated = useId();
  const areaId = id ?? generated;
  return (
    <div className={className}>
      <label htmlFor={areaId} className="block text-sm font-medium text-zinc-900">
        {label}
      </label>
      <textarea
        id={areaId}
        aria-invalid={error ? true : undefined}
        aria-describedby={describedBy(areaId, hint, error)}
        className={`${CONTROL} ${error ? 'ring-red-400' : 'ring-zinc-300'}`}
        {...rest}
      />
      <Described id={areaId} hint={hint} error={error} />
    </div>
  );
}

export interface FileFieldProps extends Omit<React.InputHTMLAttributes<HTMLInputElement>, 'type'> {
  /** The input itself (a recording made in the page is put in it). */
  ref?: React.Ref<HTMLInputElement>;
  label: string;
  hint?: React.ReactNode;
  error?: string | null;
}

export function FileField({ label, hint, error, id, className = '', ...rest }: FileFieldProps) {
  const generated = useId();
  const inputId = id ?? generated;
  return (
    <div className={className}>
      <label htmlFor={inputId} className="block text-sm font-medium text-zinc-900">
        {label}
      </label>
      <input
        id={inputId}
        type="file"
        aria-invalid={error ? true : undefined}
        aria-describedby={describedBy(inputId, hint, error)}
        className="mt-1 block w-full min-w-0 text-sm text-zinc-700 file:mr-3 file:rounded-md file:border-0 file:bg-indigo-50 file:px-3 file:py-2 file:text-sm file:font-semibold file:text-indigo-700 hover:file:bg-indigo-100 focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-indigo-600"
        {...rest}
      />
      <Described id={inputId} hint={hint} error={error} />
    </div>
  );
}
