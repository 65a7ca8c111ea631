'use client';
import { useMutation } from '@tanstack/react-query';
import { useEffect, useId, useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Button } from '@/app/_components/button';
import { TextField } from '@/app/_components/text-field';
import { humanError } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import { chooseOrg } from './org-switcher';

/**
 * "New organization" beside the org switcher: names an org, makes the user its owner and
 * switches to it (the same reload the switcher does, so nothing of the old org stays cached).
 */
export function NewOrgButton() {
  const trpc = useTRPC();
  const [open, setOpen] = useState(false);
  const ref = useRef<HTMLDialogElement>(null);
  const titleId = useId();
  const create = useMutation(
    trpc.orgs.create.mutationOptions({
      onSuccess: (org) => {
        chooseOrg(org.id);
        window.location.assign('/');
      },
    }),
  );
  useEffect(() => {
    const dialog = ref.current;
    if (open && dialog && !dialog.open) dialog.showModal();
    if (!open && dialog?.open) dialog.close();
  }, [open]);
  const error = create.error ? humanError(create.error, { name: 'name' }) : null;
  return (
    <>
      <Button variant="ghost" className="min-h-9 px-3 py-1.5" onClick={() => setOpen(true)}>
        New organization
      </Button>
      <dialog
        ref={ref}
        aria-labelledby={titleId}
        onCancel={(e) => {
          e.preventDefault();
          if (!create.isPending) setOpen(false);
        }}
        className="m-auto w-[calc(100%-2rem)] max-w-md rounded-lg bg-white p-0 shadow-xl"
      >
        <form
          onSubmit={(e) => {
            e.preventDefault();
            create.mutate({ name: String(new FormData(e.currentTarget).get('name') ?? '') });
          }}
        >
          <div className="px-5 py-5 sm:px-6">
            <h2 id={titleId} className="text-lg font-semibold text-zinc-900">
              New organization
            </h2>
            <p className="mt-2 text-sm text-zinc-700">You become its owner, and the dashboard switches to it. It starts with no credit, keys or members.</p>
            <TextField label="Name" name="name" required maxLength={200} autoFocus className="mt-4" error={error?.field === 'name' ? error.message : null} />
            {error && error.field !== 'name' && (
              <div className="mt-4">
                <Alert>{error.message}</Alert>
              </div>
            )}
          </div>
          <div className="flex flex-col-reverse gap-2 border-t border-zinc-100 bg-zinc-50 px-5 py-3 sm:flex-row sm:justify-end sm:px-6">
            <Button type="button" variant="secondary" onClick={() => setOpen(false)} disabled={create.isPending}>
              Cancel
            </Button>
            <Button type="submit" pending={create.isPending}>
              Create organization
            </Button>
          </div>
        </form>
      </dialog>
    </>
  );
}
