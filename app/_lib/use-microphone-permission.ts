'use client';
import { useEffect, useState } from 'react';

export type MicrophonePermission = 'unknown' | 'granted' | 'prompt' | 'denied' | 'unavailable';

/** What the microphone permission is, followed as the user changes it ('unavailable': no getUserMedia, e.g. plain http). */
export function useMicrophonePermission(): MicrophonePermission {
  const [state, setState] = useState<MicrophonePermission>('unknown');
  useEffect(() => {
    if (!navigator.mediaDevices?.getUserMedia) return setState('unavailable');
    let status: PermissionStatus | null = null;
    const update = () => status && setState(status.state);
    navigator.permissions
      ?.query({ name: 'microphone' as PermissionName })
      .then((s) => {
        status = s;
        update();
        s.addEventListener('change', update);
      })
      .catch(() => setState('prompt'));
    return () => status?.removeEventListener('change', update);
  }, []);
  return state;
}

/** Why the microphone cannot be used, or null when it can (or may, after the browser asks). */
export function microphoneProblem(permission: MicrophonePermission): string | null {
  if (permission === 'unavailable') return 'This browser offers no microphone here (the dashboard must be served over HTTPS).';
  if (permission === 'denied') return 'The browser blocks the microphone for this site: allow it in the address bar, then try again.';
  return null;
}
