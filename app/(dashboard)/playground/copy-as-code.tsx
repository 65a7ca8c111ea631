'use client';
import { useState } from 'react';
import { CopyButton } from '@/app/_components/copy-button';
import { codeFor, KEY_VARIABLE, LANGUAGES, type CodeRequest, type Language } from './code-samples';

/** "Copy as code" under a playground section: what it would send now, as curl, JavaScript or Python, with the key as $SVC_API_KEY. */
export function CopyAsCode({ request, section }: { request: CodeRequest | null; section: string }) {
  const [language, setLanguage] = useState<Language>('curl');
  const code = request ? codeFor(request, language) : null;
  return (
    <details className="mt-5 border-t border-zinc-100 pt-4 text-sm" data-testid="copy-as-code">
      <summary className="cursor-pointer font-medium text-zinc-700">Copy as code</summary>
      {code === null ? (
        <p className="mt-2 text-zinc-600">Choose a model first: the code is the request this section would send.</p>
      ) : (
        <div className="mt-3 space-y-2">
          <div role="tablist" aria-label={`${section} as code`} className="flex flex-wrap gap-1">
            {LANGUAGES.map((l) => (
              <button
                key={l.id}
                type="button"
                role="tab"
                aria-selected={language === l.id}
                onClick={() => setLanguage(l.id)}
                className={`rounded-md px-3 py-1.5 text-xs font-semibold ${language === l.id ? 'bg-zinc-900 text-white' : 'bg-zinc-100 text-zinc-700 hover:bg-zinc-200'}`}
              >
                {l.label}
              </button>
            ))}
          </div>
          <div className="flex flex-col gap-2 sm:flex-row sm:items-start">
            <pre
              className="min-w-0 flex-1 overflow-x-auto rounded-md bg-zinc-900 px-4 py-3 font-mono text-xs text-zinc-100"
              data-testid="code-sample"
              role="tabpanel"
            >
              <code>{code}</code>
            </pre>
            <CopyButton value={code} label="Copy" />
          </div>
          <p className="text-xs text-zinc-500">
            Set <code className="font-mono">{KEY_VARIABLE}</code> to one of your API keys first (the page never shows one).
          </p>
        </div>
      )}
    </details>
  );
}
