import { describe, expect, it } from 'vitest';
import { upstreamEnvelope, withoutAddresses } from './upstream-envelope.ts';
import { UpstreamError } from './upstreams/contract.ts';

describe('withoutAddresses', () => {
  it.each([
    ['connect ECONNREFUSED 127.0.0.1:1', 'connect ECONNREFUSED [address]'],
    ['connect ECONNREFUSED ::1:8080', 'connect ECONNREFUSED [address]'],
    ['connect ETIMEDOUT 2001:db8::7:443', 'connect ETIMEDOUT [address]'],
    ['getaddrinfo ENOTFOUND llm.internal', 'getaddrinfo ENOTFOUND [address]'],
    ['getaddrinfo EAI_AGAIN engine', 'getaddrinfo EAI_AGAIN [address]'],
    ['request to http://user:pw@10.0.0.5:8000/v1/models?x=1 failed, retrying', 'request to [address] failed, retrying'],
    ['(wss://engine.internal/v1/listen)', '([address])'],
    ['connect to [fe80::1%eth0]:443 failed', 'connect to [address] failed'],
    ['engine:8000 closed the connection', '[address] closed the connection'],
    ['10.1.2.3 refused', '[address] refused'],
    [
      "Hostname/IP does not match certificate's altnames: Host: llm.internal. is not in the cert's altnames: DNS:a.example.com, IP Address:10.0.0.9",
      "Hostname/IP does not match certificate's altnames: Host: [address]. is not in the cert's altnames: DNS:[address], IP Address:[address]",
    ],
  ])('%s', (text, expected) => {
    expect(withoutAddresses(text)).toBe(expected);
  });

  it.each([
    'The engine answered 500: model not loaded',
    'Unexpected server response: 502',
    'other side closed',
    'the stream ended at 12:30:45 after 3.5 s (v1.2.3)',
  ])('keeps what names no address: %s', (text) => {
    expect(withoutAddresses(text)).toBe(text);
  });
});

describe('upstreamEnvelope', () => {
  it('the client’s error names no address; its cause, which the log writes, is the engine’s own failure', () => {
    const failure = new UpstreamError('connect', 'connect ECONNREFUSED 10.0.0.5:8000');
    const error = upstreamEnvelope(failure, 1000);
    expect(error.message).toBe('The model upstream is unreachable (connect ECONNREFUSED [address]); retry with backoff.');
    expect(error.cause).toBe(failure);
  });
});
