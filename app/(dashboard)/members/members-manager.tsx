'use client';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Badge } from '@/app/_components/badge';
import { Button } from '@/app/_components/button';
import { Card, EmptyState, PageHeader } from '@/app/_components/card';
import { ConfirmDialog } from '@/app/_components/confirm-dialog';
import { CopyButton } from '@/app/_components/copy-button';
import { SelectField } from '@/app/_components/fields';
import { LoadingBlock } from '@/app/_components/spinner';
import { TextField } from '@/app/_components/text-field';
import type { RouterOutputs } from '@/app/_lib/api-types';
import { errorMessage, formatDateTime } from '@/app/_lib/format';
import { useTRPC } from '@/app/_lib/trpc';

type OrgMembers = RouterOutputs['orgs']['members'];
type MemberRow = OrgMembers['members'][number];
type InvitationRow = OrgMembers['invitations'][number];
type Role = MemberRow['role'];

const ROLE_LABEL: Record<Role, string> = { owner: 'Owner', member: 'Member' };

/** Everything that shows the org's name, members or the user's role. */
function useInvalidateOrg() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  return () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.orgs.members.queryKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.orgs.mine.queryKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.account.me.queryKey() }),
      queryClient.invalidateQueries({ queryKey: trpc.account.overview.queryKey() }),
    ]);
}

export function MembersManager() {
  const trpc = useTRPC();
  const me = useQuery(trpc.account.me.queryOptions());
  // Owner-only actions are enforced by the server; here they are hidden for members, with a
  // note saying why. Until the role is known, neither is shown.
  const canManage = me.data?.canManage;
  return (
    <>
      <PageHeader
        title="Members"
        description="Members use the organization's keys, voices, dictionaries, playground and usage. Owners also create and revoke keys, manage members and rename the organization."
      />
      <div className="space-y-6">
        {canManage === false && (
          <div data-testid="members-member-note">
            <Alert tone="info" title="Only owners can add, change or remove members">
              You are a member of <strong>{me.data?.org.name}</strong>. Ask one of its owners below.
            </Alert>
          </div>
        )}
        {canManage === true && me.data && <AddMember />}
        <MemberList canManage={canManage === true} />
        {canManage === true && me.data && <RenameOrg currentName={me.data.org.name} />}
      </div>
    </>
  );
}

function AddMember() {
  const trpc = useTRPC();
  const invalidate = useInvalidateOrg();
  const formRef = useRef<HTMLFormElement>(null);
  const add = useMutation(
    trpc.orgs.addMember.mutationOptions({
      onSuccess: async () => {
        formRef.current?.reset();
        await invalidate();
      },
    }),
  );
  const result = add.data;
  return (
    <Card
      title="Add a member"
      description="By email. An account that has verified that email joins at once; anyone else gets an invite link for you to share, and joins by opening it signed in."
    >
      <form
        ref={formRef}
        className="flex flex-col gap-3 sm:flex-row sm:items-end"
        onSubmit={(event) => {
          event.preventDefault();
          const form = new FormData(event.currentTarget);
          add.mutate({ email: String(form.get('email') ?? ''), role: form.get('role') === 'owner' ? 'owner' : 'member' });
        }}
      >
        <TextField label="Email" name="email" type="email" required maxLength={254} autoComplete="off" placeholder="name@example.com" className="flex-1" />
        <SelectField label="Role" name="role" defaultValue="member" className="sm:w-36">
          <option value="member">Member</option>
          <option value="owner">Owner</option>
        </SelectField>
        <Button type="submit" pending={add.isPending}>
          Add
        </Button>
      </form>
      {add.error && (
        <div className="mt-3">
          <Alert>{errorMessage(add.error)}</Alert>
        </div>
      )}
      {result && !add.error && (
        <div className="mt-3" data-testid="add-member-result">
          {result.status === 'added' ? (
            <Alert tone="success">
              <strong className="break-all">{result.email}</strong> is now {result.role === 'owner' ? 'an owner' : 'a member'}.
            </Alert>
          ) : (
            <InviteLink email={result.email} role={result.role} expiresAt={result.expiresAt} url={result.inviteUrl} />
          )}
        </div>
      )}
    </Card>
  );
}

/** The invite link, shown once (only its hash is stored): the owner copies it to the person. */
function InviteLink({ email, role, expiresAt, url }: { email: string; role: Role; expiresAt: string; url: string }) {
  const inputRef = useRef<HTMLInputElement>(null);
  return (
    <Alert tone="info" title={`Invitation for ${email}`}>
      <p>
        No account has proven it owns <strong className="break-all">{email}</strong>, so nobody joins by that address alone. Send them this link: opening it
        signed in (or after signing up) makes that account {role === 'owner' ? 'an owner' : 'a member'}. It works once, until {formatDateTime(expiresAt)}, and
        is shown only now; adding the email again makes a new link and ends this one. Nothing is emailed.
      </p>
      <div className="mt-2 flex gap-2">
        <input
          ref={inputRef}
          readOnly
          value={url}
          aria-label="Invite link"
          data-testid="invite-link"
          onFocus={(e) => e.currentTarget.select()}
          className="min-w-0 flex-1 rounded-md border-0 bg-white px-2 py-1.5 font-mono text-xs text-zinc-900 ring-1 ring-zinc-300 ring-inset"
        />
        <CopyButton value={url} fallbackTarget={() => inputRef.current} label="Copy link" />
      </div>
    </Alert>
  );
}

const GRID = 'md:grid-cols-[minmax(0,2fr)_6rem_minmax(0,1fr)_15rem]';

function MemberList({ canManage }: { canManage: boolean }) {
  const trpc = useTRPC();
  const invalidate = useInvalidateOrg();
  const list = useQuery(trpc.orgs.members.queryOptions());
  const [removing, setRemoving] = useState<MemberRow | null>(null);
  const [announcement, setAnnouncement] = useState('');
  const remove = useMutation(
    trpc.orgs.removeMember.mutationOptions({
      onSuccess: async () => {
        const target = removing;
        setRemoving(null);
        // Leaving: the dashboard can no longer act for this org; start again from the user's own.
        if (target?.isYou) {
          window.location.assign('/');
          return;
        }
        setAnnouncement(`${target?.email} was removed.`);
        await invalidate();
      },
    }),
  );

  if (list.isPending) {
    return (
      <Card title="People">
        <LoadingBlock label="Loading members" />
      </Card>
    );
  }
  if (list.isError) {
    return (
      <Card title="People">
        <Alert title="Could not load the members" onRetry={() => void list.refetch()}>
          {errorMessage(list.error)}
        </Alert>
      </Card>
    );
  }
  const { members, invitations } = list.data;
  const owners = members.filter((m) => m.role === 'owner').length;
  return (
    <>
      <Card title="People" description={`${members.length} ${members.length === 1 ? 'person' : 'people'} in ${list.data.org.name}.`}>
        <div
          className={`hidden gap-4 border-b border-zinc-100 pb-2 text-xs font-semibold tracking-wide text-zinc-500 uppercase md:grid ${GRID}`}
          aria-hidden="true"
        >
          <span>Member</span>
          <span>Role</span>
          <span>Joined</span>
          <span className="sr-only">Actions</span>
        </div>
        <ul className="divide-y divide-zinc-100" aria-label="Members">
          {members.map((m) => (
            <MemberListItem
              key={m.userId}
              m={m}
              canManage={canManage}
              isLastOwner={m.role === 'owner' && owners <= 1}
              onRemove={() => {
                remove.reset();
                setRemoving(m);
              }}
              onRoleChanged={(role) => {
                setAnnouncement(`${m.email} is now ${role === 'owner' ? 'an owner' : 'a member'}.`);
              }}
            />
          ))}
        </ul>
        <p className="sr-only" role="status" aria-live="polite">
          {announcement}
        </p>
      </Card>
      <Invitations invitations={invitations} canManage={canManage} />
      <ConfirmDialog
        open={removing !== null}
        title={removing?.isYou ? 'Leave this organization?' : 'Remove this member?'}
        confirmLabel={removing?.isYou ? 'Leave' : 'Remove'}
        pending={remove.isPending}
        error={remove.error ? errorMessage(remove.error) : null}
        onCancel={() => setRemoving(null)}
        onConfirm={() => removing && remove.mutate({ userId: removing.userId })}
      >
        {removing?.isYou ? (
          <p>
            You will no longer see or use <strong>{list.data.org.name}</strong>. An owner can add you again.
          </p>
        ) : (
          <p>
            <strong className="break-all">{removing?.email}</strong> loses access to <strong>{list.data.org.name}</strong> on their next request. The keys of
            the organization keep working; revoke any they should no longer hold.
          </p>
        )}
      </ConfirmDialog>
    </>
  );
}

function MemberListItem({
  m,
  canManage,
  isLastOwner,
  onRemove,
  onRoleChanged,
}: {
  m: MemberRow;
  canManage: boolean;
  isLastOwner: boolean;
  onRemove: () => void;
  onRoleChanged: (role: Role) => void;
}) {
  const trpc = useTRPC();
  const invalidate = useInvalidateOrg();
  const nextRole: Role = m.role === 'owner' ? 'member' : 'owner';
  const changeRole = useMutation(
    trpc.orgs.changeRole.mutationOptions({
      onSuccess: async (result) => {
        await invalidate();
        onRoleChanged(result.role);
      },
    }),
  );
  const who = m.name ? `${m.name} (${m.email})` : m.email;
  const lastOwnerHintId = `last-owner-${m.userId}`;
  return (
    <li data-testid="member-row" data-email={m.email} className={`grid grid-cols-[minmax(0,1fr)_auto] items-center gap-x-4 gap-y-1 py-3 ${GRID}`}>
      <span className="min-w-0">
        <span className="block truncate font-medium text-zinc-900" title={m.name ?? m.email}>
          {m.name ?? m.email}
          {m.isYou && <span className="ml-1 text-sm font-normal text-zinc-500">(you)</span>}
        </span>
        {m.name && <span className="block truncate text-sm text-zinc-600">{m.email}</span>}
      </span>
      <span className="justify-self-end md:justify-self-start" data-testid="member-role">
        <Badge tone={m.role === 'owner' ? 'indigo' : 'gray'}>{ROLE_LABEL[m.role]}</Badge>
      </span>
      <span className="col-span-2 text-sm text-zinc-600 md:col-span-1">
        <span className="md:sr-only">Joined </span>
        {formatDateTime(m.joinedAt)}
      </span>
      {canManage && (
        <span className="col-span-2 flex flex-wrap items-center gap-2 md:col-span-1 md:justify-end">
          <Button
            variant="secondary"
            className="min-h-8 px-3 py-1"
            pending={changeRole.isPending}
            disabled={isLastOwner}
            aria-describedby={isLastOwner ? lastOwnerHintId : undefined}
            aria-label={`Make ${who} ${nextRole === 'owner' ? 'an owner' : 'a member'}`}
            onClick={() => {
              changeRole.reset();
              changeRole.mutate({ userId: m.userId, role: nextRole });
            }}
          >
            {nextRole === 'owner' ? 'Make owner' : 'Make member'}
          </Button>
          <Button
            variant="secondary"
            className="min-h-8 px-3 py-1"
            disabled={isLastOwner}
            aria-describedby={isLastOwner ? lastOwnerHintId : undefined}
            aria-label={m.isYou ? 'Leave this organization' : `Remove ${who}`}
            onClick={onRemove}
          >
            {m.isYou ? 'Leave' : 'Remove'}
          </Button>
          {isLastOwner && (
            <span id={lastOwnerHintId} className="w-full text-xs text-zinc-500 md:text-right">
              The last owner: make someone else an owner first.
            </span>
          )}
        </span>
      )}
      {changeRole.error && (
        <div className="col-span-full">
          <Alert>{errorMessage(changeRole.error)}</Alert>
        </div>
      )}
    </li>
  );
}

function Invitations({ invitations, canManage }: { invitations: InvitationRow[]; canManage: boolean }) {
  return (
    <Card
      title="Pending invitations"
      description="Each waits for its invite link to be opened by a signed-in account, or for an account to verify that email, until it lapses. To get a new link, add the email again."
    >
      {invitations.length === 0 ? (
        <EmptyState title="No pending invitations">
          {canManage ? 'Adding an email that no verified account uses invites it, with a link to share.' : undefined}
        </EmptyState>
      ) : (
        <ul className="divide-y divide-zinc-100" aria-label="Pending invitations">
          {invitations.map((i) => (
            <InvitationItem key={i.id} invitation={i} canManage={canManage} />
          ))}
        </ul>
      )}
    </Card>
  );
}

function InvitationItem({ invitation: i, canManage }: { invitation: InvitationRow; canManage: boolean }) {
  const trpc = useTRPC();
  const invalidate = useInvalidateOrg();
  const withdraw = useMutation(trpc.orgs.revokeInvitation.mutationOptions({ onSuccess: () => invalidate() }));
  return (
    <li data-testid="invitation-row" data-email={i.email} className="flex flex-wrap items-center justify-between gap-x-4 gap-y-2 py-3">
      <span className="min-w-0">
        <span className="block truncate font-medium text-zinc-900">{i.email}</span>
        <span className="block text-sm text-zinc-600">
          {ROLE_LABEL[i.role]} · invited {formatDateTime(i.createdAt)} · lapses {formatDateTime(i.expiresAt)}
        </span>
      </span>
      {canManage && (
        <Button
          variant="secondary"
          className="min-h-8 px-3 py-1"
          pending={withdraw.isPending}
          aria-label={`Withdraw the invitation of ${i.email}`}
          onClick={() => withdraw.mutate({ id: i.id })}
        >
          Withdraw
        </Button>
      )}
      {withdraw.error && (
        <div className="w-full">
          <Alert>{errorMessage(withdraw.error)}</Alert>
        </div>
      )}
    </li>
  );
}

function RenameOrg({ currentName }: { currentName: string }) {
  const trpc = useTRPC();
  const invalidate = useInvalidateOrg();
  const [name, setName] = useState(currentName);
  const rename = useMutation(trpc.orgs.rename.mutationOptions({ onSuccess: () => invalidate() }));
  return (
    <Card title="Organization name">
      <form
        className="flex flex-col gap-3 sm:flex-row sm:items-end"
        onSubmit={(event) => {
          event.preventDefault();
          rename.mutate({ name });
        }}
      >
        <TextField label="Name" name="name" required maxLength={200} value={name} onChange={(e) => setName(e.target.value)} className="flex-1" />
        <Button type="submit" pending={rename.isPending} disabled={name.trim() === currentName}>
          Rename
        </Button>
      </form>
      {rename.error && (
        <div className="mt-3">
          <Alert>{errorMessage(rename.error)}</Alert>
        </div>
      )}
      {rename.isSuccess && !rename.error && name.trim() === currentName && (
        <div className="mt-3">
          <Alert tone="success">Renamed.</Alert>
        </div>
      )}
    </Card>
  );
}
