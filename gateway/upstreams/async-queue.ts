/** A push-to-pull bridge: producers push chunks, one consumer iterates them in order. */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private waiter: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void } | null = null;
  private ended = false;
  private failure: unknown = undefined;

  push(item: T): void {
    if (this.ended) return;
    const w = this.waiter;
    if (w) {
      this.waiter = null;
      w.resolve({ value: item, done: false });
    } else this.items.push(item);
  }

  /** Ends the stream, with an error the consumer will see after the queued items, if given. */
  end(error?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = error;
    const w = this.waiter;
    if (w) {
      this.waiter = null;
      if (error !== undefined) w.reject(error);
      else w.resolve({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.items.length > 0) return Promise.resolve({ value: this.items.shift()!, done: false });
        if (this.ended) return this.failure !== undefined ? Promise.reject(this.failure) : Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => {
          this.waiter = { resolve, reject };
        });
      },
    };
  }
}
