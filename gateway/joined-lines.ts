import type { DestinationStream } from 'pino';

/**
 * Lines gathered in an array and handed to the destination joined, a batch at a time.
 * sonic-boom's own batching (minLength) appends each line to one string and measures that
 * string's length in bytes at every write: a copy of the batch so far for every line.
 */
export class JoinedLines implements DestinationStream {
  private lines: string[] = [];
  private chars = 0;

  constructor(
    private readonly out: { write(chunk: string): unknown; flushSync(): void },
    private readonly batchChars: number,
  ) {}

  write(line: string): void {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= this.batchChars) this.flush();
  }

  /** Hands what waits to the destination. */
  flush(): void {
    if (this.lines.length === 0) return;
    const chunk = this.lines.length === 1 ? this.lines[0]! : this.lines.join('');
    this.lines = [];
    this.chars = 0;
    this.out.write(chunk);
  }

  /** Writes what waits, and what the destination holds, before returning (pino calls it on a fatal error). */
  flushSync(): void {
    this.flush();
    this.out.flushSync();
  }
}
