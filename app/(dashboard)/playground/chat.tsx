'use client';
// The chat playground: a conversation with one of the org's LLM models through the proxy's
// POST v1/chat/completions, streamed token by token. A streamed answer's headers go before its
// cost is known, so each answer's tokens and cost are read afterwards from the ledger by its
// request id (playground.charge), the same figures as its row in Logs.
import { useQuery } from '@tanstack/react-query';
import Link from 'next/link';
import { useEffect, useRef, useState } from 'react';
import { Alert } from '@/app/_components/alert';
import { Button } from '@/app/_components/button';
import { Card } from '@/app/_components/card';
import { SelectField, TextAreaField } from '@/app/_components/fields';
import { ReasonButton } from '@/app/_components/reason-button';
import { RequestLogLink } from '@/app/_components/request-log-link';
import { errorMessage, usd } from '@/app/_lib/format';
import { GatewayError, gatewayFetch } from '@/app/_lib/gateway';
import { sseData } from '@/app/_lib/sse';
import { useTRPC } from '@/app/_lib/trpc';
import type { CodeRequest } from './code-samples';
import { CopyAsCode } from './copy-as-code';

/** What one conversation keeps and sends: its last 40 messages. */
const MAX_MESSAGES = 40;
const MAX_MESSAGE_CHARS = 20_000;

interface Message {
  id: number;
  role: 'user' | 'assistant';
  content: string;
  /** An answer: the x-request-id of its request (its ledger debits and Logs row). */
  requestId?: string | null;
  state?: 'streaming' | 'done' | 'stopped' | 'failed';
}

type Chunk = { choices?: { delta?: { content?: string | null } }[]; error?: { message?: string; code?: string } };

export function Chat({ gatewayUrl }: { gatewayUrl: string }) {
  const trpc = useTRPC();
  const models = useQuery(trpc.models.catalog.queryOptions({ modality: 'llm' }));
  const [modelId, setModelId] = useState('');
  const [system, setSystem] = useState('');
  const [draft, setDraft] = useState('');
  const [messages, setMessages] = useState<Message[]>([]);
  const [error, setError] = useState<unknown>(null);
  const abort = useRef<AbortController | null>(null);
  const nextId = useRef(1);
  const streaming = messages.some((m) => m.state === 'streaming');
  const model = modelId || models.data?.[0]?.id || '';

  useEffect(() => () => abort.current?.abort(), []);

  /** The messages a request sends: the system prompt, then the conversation (answers that failed left out). */
  const wire = (history: Message[]) => [
    ...(system.trim() ? [{ role: 'system' as const, content: system.trim() }] : []),
    ...history.filter((m) => m.state !== 'failed' && m.content !== '').map((m) => ({ role: m.role, content: m.content })),
  ];

  async function send() {
    const text = draft.trim();
    if (!text || !model || streaming) return;
    const user: Message = { id: nextId.current++, role: 'user', content: text };
    const answer: Message = { id: nextId.current++, role: 'assistant', content: '', state: 'streaming', requestId: null };
    const history = [...messages, user].slice(-MAX_MESSAGES);
    setMessages([...history, answer]);
    setDraft('');
    setError(null);
    const update = (change: Partial<Message>) => setMessages((all) => all.map((m) => (m.id === answer.id ? { ...m, ...change } : m)));
    const controller = new AbortController();
    abort.current = controller;
    let content = '';
    try {
      const res = await gatewayFetch('v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: wire(history), stream: true }),
        signal: controller.signal,
      });
      const requestId = res.headers.get('x-request-id');
      update({ requestId });
      for await (const data of sseData(res.body!)) {
        const chunk = JSON.parse(data) as Chunk;
        // An engine that failed mid-answer ends the stream with an error event.
        if (chunk.error) throw new GatewayError(chunk.error.message ?? 'The model stopped with an error.', 502, chunk.error.code ?? null, null, requestId);
        content += chunk.choices?.[0]?.delta?.content ?? '';
        update({ content });
      }
      update({ state: 'done' });
    } catch (e) {
      if (controller.signal.aborted) return update({ state: 'stopped' });
      update({ state: content ? 'stopped' : 'failed' });
      setError(e);
    } finally {
      abort.current = null;
    }
  }

  const why = models.isPending
    ? 'Loading the models…'
    : !models.data?.length
      ? 'No LLM model is configured: an operator adds one (svc model upsert --modality llm).'
      : streaming
        ? null
        : draft.trim() === ''
          ? 'Type a message.'
          : draft.length > MAX_MESSAGE_CHARS
            ? `The message is over ${MAX_MESSAGE_CHARS.toLocaleString('en')} characters.`
            : null;

  const code: CodeRequest | null = model
    ? {
        kind: 'json',
        url: `${gatewayUrl}/v1/chat/completions`,
        body: {
          model,
          messages: wire(draft.trim() ? [...messages, { id: 0, role: 'user', content: draft.trim() }] : messages),
          stream: true,
        },
        stream: true,
      }
    : null;

  if (models.isError)
    return (
      <Alert title="Could not load the models" onRetry={() => void models.refetch()}>
        {errorMessage(models.error)}
      </Alert>
    );
  return (
    <Card title="Chat" description="Talk to an LLM as POST /v1/chat/completions does, streamed token by token. Billed per token in and out.">
      <form
        aria-label="Chat with a model"
        className="grid gap-4 sm:grid-cols-2"
        noValidate
        onSubmit={(e) => {
          e.preventDefault();
          if (!why) void send();
        }}
      >
        <SelectField label="LLM" value={model} onChange={(e) => setModelId(e.target.value)} disabled={!models.data?.length || streaming}>
          {models.data?.length ? (
            models.data.map((m) => (
              <option key={m.id} value={m.id}>
                {m.id}
                {m.displayName ? ` — ${m.displayName}` : ''}
              </option>
            ))
          ) : (
            <option value="">{models.isPending ? 'Loading…' : 'No LLM model'}</option>
          )}
        </SelectField>
        <TextAreaField
          label="System prompt (optional)"
          value={system}
          onChange={(e) => setSystem(e.target.value)}
          rows={1}
          maxLength={4000}
          placeholder="You are a helpful assistant."
          disabled={streaming}
        />
        {messages.length > 0 && (
          <ol aria-label="Conversation" aria-live="polite" className="space-y-2 sm:col-span-2">
            {messages.map((m) => (
              <ChatLine key={m.id} message={m} />
            ))}
          </ol>
        )}
        <TextAreaField
          label="Message"
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          onKeyDown={(e) => {
            // Enter sends, Shift+Enter is a new line (as chat boxes do).
            if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
              e.preventDefault();
              if (!why) void send();
            }
          }}
          rows={2}
          placeholder="Ask something…"
          className="sm:col-span-2"
        />
        <div className="flex flex-wrap items-center gap-3 sm:col-span-2">
          {streaming ? (
            <Button variant="secondary" onClick={() => abort.current?.abort()}>
              Stop
            </Button>
          ) : (
            <ReasonButton type="submit" reason={why}>
              Send
            </ReasonButton>
          )}
          {messages.length > 0 && !streaming && (
            <Button variant="ghost" onClick={() => setMessages([])}>
              Clear the conversation
            </Button>
          )}
        </div>
        {error !== null && (
          <div className="sm:col-span-2">
            <Alert title="The answer failed">
              {errorMessage(error)}
              <RequestLogLink error={error} />
            </Alert>
          </div>
        )}
      </form>
      <CopyAsCode request={code} section="Chat" />
    </Card>
  );
}

function ChatLine({ message }: { message: Message }) {
  const user = message.role === 'user';
  return (
    <li data-testid={`chat-${message.role}`} data-state={message.state} className={`flex ${user ? 'justify-end' : ''}`}>
      <div className={`max-w-[85%] rounded-lg px-3 py-2 text-sm whitespace-pre-wrap ${user ? 'bg-zinc-900 text-white' : 'bg-zinc-100 text-zinc-900'}`}>
        <span className="sr-only">{user ? 'You: ' : 'Model: '}</span>
        <span data-testid={user ? undefined : 'chat-answer-text'}>{message.content || (message.state === 'streaming' ? '…' : '')}</span>
        {message.state === 'stopped' && <span className="ml-1 text-xs opacity-70">(stopped)</span>}
        {message.state === 'failed' && <span className="text-xs opacity-70">(no answer)</span>}
        {!user && message.requestId && message.state !== 'streaming' && <AnswerCharge requestId={message.requestId} />}
      </div>
    </li>
  );
}

/** An answer's tokens and cost as the ledger holds them, read until its debit is written (just after the stream ends). */
function AnswerCharge({ requestId }: { requestId: string }) {
  const trpc = useTRPC();
  // The debit is written just after the stream ends: asked again every 250 ms for up to 5 s.
  const [since] = useState(() => Date.now());
  const charge = useQuery({
    ...trpc.playground.charge.queryOptions({ requestId }),
    refetchInterval: (q) => (q.state.data === null && Date.now() - since < 5_000 ? 250 : false),
  });
  const gaveUp = charge.data === null && !charge.isFetching && Date.now() - since >= 5_000;
  const logs = (
    <>
      Request <span className="font-mono">{requestId}</span> ·{' '}
      <Link href={`/logs?${new URLSearchParams({ request_id: requestId })}`} className="font-semibold underline">
        See it in Logs
      </Link>
    </>
  );
  const c = charge.data;
  return (
    <span className="mt-1 block text-xs text-zinc-500" data-testid="chat-usage">
      {c ? (
        <>
          <span data-testid="chat-tokens">
            {c.inputTokens.toLocaleString('en')} tokens in · {c.outputTokens.toLocaleString('en')} out
          </span>{' '}
          · cost <span className="font-mono">{usd(c.costUsd)}</span> · credits left <span className="font-mono">{usd(c.remainingUsd)}</span> · {logs}
        </>
      ) : charge.isError ? (
        <>
          The cost could not be read: {errorMessage(charge.error)} · {logs}
        </>
      ) : gaveUp ? (
        <>No charge is recorded for it yet · {logs}</>
      ) : (
        <>Reading the cost… · {logs}</>
      )}
    </span>
  );
}
