'use client';
import { useMutation } from '@tanstack/react-query';
import Link from 'next/link';
import { signOut } from 'next-auth/react';
import { useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Button } from '@/app/_components/button';
import { SelectField } from '@/app/_components/fields';
import { LinkCard } from '@/app/_components/link-page';
import { TextField } from '@/app/_components/text-field';
import { errorMessage, formatDateTime, withCallback } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';
import { OrgSwitcher } from '../(dashboard)/org-switcher';

const serviceCode = (error: unknown) => (error as { data?: { serviceCode?: string | null } } | null)?.data?.serviceCode;

export function ClaimForm({ initialCode, email, returnTo }: { initialCode: string; email: string; returnTo: string }) {
  const trpc = useTRPC();
  const check = useMutation(trpc.claims.check.mutationOptions());
  const confirm = useMutation(trpc.claims.confirm.mutationOptions());
  const deny = useMutation(trpc.claims.deny.mutationOptions());
  const [code, setCode] = useState(initialCode);
  const [outcome, setOutcome] = useState<'confirmed' | 'denied' | null>(null);
  const [signingOut, setSigningOut] = useState(false);
  // The org that pays and gets the key: the one the user acts for when they own it (the server lists it first).
  const [chosenOrgId, setChosenOrgId] = useState<string | null>(null);

  const claim = check.data;
  const payer = claim?.orgs.find((o) => o.id === chosenOrgId) ?? claim?.orgs[0] ?? null;
  const error = check.error ?? confirm.error ?? deny.error;

  async function switchAccount() {
    setSigningOut(true);
    await signOut({ redirect: false }).catch(() => undefined);
    window.location.assign(withCallback('/signin', returnTo));
  }

  function restart() {
    check.reset();
    confirm.reset();
    deny.reset();
    setCode('');
    setChosenOrgId(null);
  }

  if (outcome === 'confirmed' && confirm.data) {
    return (
      <LinkCard title="Agent authorised">
        <Alert tone="success">
          The agent receives its API key on its next poll, within a few seconds. The key belongs to <strong>{confirm.data.orgName}</strong> and is listed on the
          API keys page, where you can revoke it at any time.
        </Alert>
        <div className="mt-4 flex gap-3">
          <Link href="/keys" className="font-semibold text-indigo-700 hover:text-indigo-600">
            Go to API keys
          </Link>
        </div>
      </LinkCard>
    );
  }
  if (outcome === 'denied') {
    return (
      <LinkCard title="Agent denied">
        <Alert tone="info">The agent&apos;s registration has ended; it receives no key. If this was a mistake, ask the agent to register again.</Alert>
      </LinkCard>
    );
  }

  return (
    <LinkCard title={claim ? 'Authorise this agent?' : 'Authorise an agent'}>
      <p className="text-sm text-zinc-600">
        Signed in as <strong className="break-all text-zinc-900">{email}</strong>.{' '}
        <button type="button" onClick={switchAccount} disabled={signingOut} className="font-semibold text-indigo-700 underline hover:text-indigo-600">
          Use another account
        </button>
      </p>

      {!claim && (
        <form
          className="mt-5 space-y-4"
          onSubmit={(event) => {
            event.preventDefault();
            confirm.reset();
            deny.reset();
            check.mutate({ code });
          }}
        >
          <TextField
            label="Code from the agent"
            name="code"
            value={code}
            onChange={(event) => setCode(event.target.value)}
            inputMode="numeric"
            autoComplete="one-time-code"
            placeholder="123456"
            maxLength={7}
            required
            autoFocus
            hint="The 6-digit code the agent showed you. It works for 10 minutes."
          />
          {error && <ClaimError error={error} onSwitchAccount={switchAccount} />}
          <Button type="submit" pending={check.isPending} className="w-full">
            Continue
          </Button>
        </form>
      )}

      {claim && (
        <div className="mt-5 space-y-4">
          <dl className="divide-y divide-zinc-100 rounded-md border border-zinc-200 text-sm" data-testid="claim-details">
            <Row label="Agent">
              {claim.agentName ? (
                <>
                  <span className="font-semibold break-words" data-testid="claim-agent-name">
                    {claim.agentName}
                  </span>{' '}
                  <span className="text-zinc-500">(the name it gave itself)</span>
                </>
              ) : (
                <span className="text-zinc-600">It gave no name.</span>
              )}
              {claim.userAgent && (
                <span className="mt-0.5 block text-xs break-all text-zinc-500" data-testid="claim-user-agent">
                  Software: {claim.userAgent}
                </span>
              )}
            </Row>
            <Row label="Registered">{formatDateTime(claim.registeredAt)}</Row>
            <Row label="From network">
              {claim.network ? (
                <>
                  <span className="font-mono" data-testid="claim-network">
                    {claim.network}
                  </span>{' '}
                  <span className="text-zinc-500">(the address it registered from, to its network)</span>
                </>
              ) : (
                'Unknown'
              )}
            </Row>
            <Row label="Registration">
              {claim.registrationType === 'anonymous' ? 'Anonymous agent on a trial key' : 'Agent registered for your email address'}
              <span className="mt-0.5 block font-mono text-xs break-all text-zinc-500">{claim.registrationId}</span>
            </Row>
            <Row label="Claimed for">
              <span className="break-all">{claim.email}</span>
            </Row>
            <Row label="Access">
              Full API access ({claim.scopes.join(', ')}), billed to {payer?.name ?? claim.org.name}
            </Row>
            <Row label="Code valid until">{formatDateTime(claim.codeExpiresAt)}</Row>
          </dl>
          {claim.orgs.length > 1 && (
            <SelectField
              label="Organization that pays and gets the key"
              name="orgId"
              value={payer?.id}
              onChange={(event) => setChosenOrgId(event.target.value)}
              hint="Only organizations you own."
            >
              {claim.orgs.map((o) => (
                <option key={o.id} value={o.id}>
                  {o.name}
                </option>
              ))}
            </SelectField>
          )}
          <Alert tone="warning">
            The agent gets a new API key on <strong>{payer?.name ?? claim.org.name}</strong> and can spend its credits.
            {claim.trialKeyPrefix && (
              <>
                {' '}
                Its trial key <span className="font-mono">{claim.trialKeyPrefix}…</span> stops working; what it made during the trial (voices, dictionaries)
                moves to that organization. The rest of the trial credit is not transferred.
              </>
            )}{' '}
            Only continue if you started this agent.
          </Alert>
          {!claim.canConfirm && (
            <div data-testid="claim-needs-owner">
              <Alert tone="info" title="Only owners can authorise an agent">
                <p>
                  You own no organization, and authorising gives the agent a key on one. Ask an owner of {claim.org.name}, or switch to an organization you own
                  and enter the code again.
                </p>
                <div className="mt-3">
                  <OrgSwitcher />
                </div>
              </Alert>
            </div>
          )}
          {error && <ClaimError error={error} onSwitchAccount={switchAccount} />}
          <div className="flex flex-col-reverse gap-3 sm:flex-row sm:justify-end">
            <Button variant="secondary" onClick={restart} disabled={confirm.isPending || deny.isPending}>
              Back
            </Button>
            <Button
              variant="danger"
              pending={deny.isPending}
              disabled={confirm.isPending}
              onClick={() => deny.mutate({ code }, { onSuccess: () => setOutcome('denied') })}
            >
              Deny
            </Button>
            <Button
              pending={confirm.isPending}
              disabled={deny.isPending || !claim.canConfirm}
              onClick={() => confirm.mutate({ code, orgId: payer?.id }, { onSuccess: () => setOutcome('confirmed') })}
            >
              Authorise agent
            </Button>
          </div>
        </div>
      )}
    </LinkCard>
  );
}

/**
 * A code that opens nothing gets one answer whatever the reason (server: describe-claim.ts),
 * one of which is a code issued for another email address: offer the switch with it.
 */
function ClaimError({ error, onSwitchAccount }: { error: unknown; onSwitchAccount: () => void }) {
  if (serviceCode(error) === 'invalid_grant') {
    // What is left to try (or that nothing is: the code is locked) stands out from the rest.
    const sentences = errorMessage(error).split(/(?<=\.) (?=[A-Z0-9])/);
    return (
      <Alert>
        {sentences.map((sentence, i) => {
          const key = /wrong entr(y|ies) left|locked/.test(sentence);
          return (
            <span key={i}>
              {i > 0 && ' '}
              {key ? (
                <strong className="font-semibold" data-testid="claim-tries">
                  {sentence}
                </strong>
              ) : (
                sentence
              )}
            </span>
          );
        })}{' '}
        <button type="button" onClick={onSwitchAccount} className="font-semibold underline">
          Sign in with another account
        </button>
      </Alert>
    );
  }
  return <Alert>{errorMessage(error)}</Alert>;
}

function Row({ label, children }: { label: string; children: React.ReactNode }) {
  return (
    <div className="grid grid-cols-1 gap-1 px-3 py-2 sm:grid-cols-3 sm:gap-3">
      <dt className="font-medium text-zinc-500">{label}</dt>
      <dd className="text-zinc-900 sm:col-span-2">{children}</dd>
    </div>
  );
}
