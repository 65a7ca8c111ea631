'use client';
// The voices page: the library first (what most visits are for), the clone form behind a
// button, so it no longer pushes the library ~900 px down; and the confirmation that a voice
// was deleted, when its page sent the user back here.
import { usePathname, useRouter } from 'next/navigation';
import { useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Button } from '@/app/_components/button';
import { PageHeader } from '@/app/_components/card';
import { CloneVoice } from './clone-voice';
import { VoicesBrowser } from './voices-browser';

export function VoicesView({ deletedName }: { deletedName: string | null }) {
  const router = useRouter();
  const pathname = usePathname();
  const [cloning, setCloning] = useState(false);
  const cloneRef = useRef<HTMLDivElement>(null);
  const openClone = () => {
    setCloning(true);
    // After React has shown it: bring the form into view and put the keyboard in its first field.
    requestAnimationFrame(() => {
      cloneRef.current?.scrollIntoView({ block: 'start', behavior: 'smooth' });
      cloneRef.current?.querySelector<HTMLInputElement>('input')?.focus({ preventScroll: true });
    });
  };
  return (
    <>
      <PageHeader title="Voices" description="Browse the voice library and hear each voice, clone a voice from a recording, and manage your own voices.">
        <Button
          variant={cloning ? 'secondary' : 'primary'}
          aria-expanded={cloning}
          aria-controls="clone-voice"
          onClick={() => (cloning ? setCloning(false) : openClone())}
        >
          {cloning ? 'Close the clone form' : 'Clone a voice'}
        </Button>
      </PageHeader>
      <div className="space-y-6">
        {deletedName !== null && (
          <div data-testid="voice-deleted">
            <Alert tone="success" title={`Voice “${deletedName}” deleted`}>
              It is gone from your library and the API; requests that name it now get <code className="font-mono text-xs">voice_not_found</code>.{' '}
              <button type="button" className="font-semibold underline" onClick={() => router.replace(pathname)}>
                Dismiss
              </button>
            </Alert>
          </div>
        )}
        {cloning && (
          <div id="clone-voice" ref={cloneRef} className="scroll-mt-4">
            <CloneVoice />
          </div>
        )}
        <VoicesBrowser onCloneRequested={openClone} />
      </div>
    </>
  );
}
