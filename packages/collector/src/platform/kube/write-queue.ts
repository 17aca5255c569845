// The VM state annotations, written through a bounded queue: at most `concurrency` PATCHes in
// flight, and a VM with a write still waiting gets its newer values merged into that one (the
// annotations are last-writer-wins, so only the latest state matters). A reconnect burst of 10k
// first Reports is 10k transitions; unbounded, it would open 10k sockets to the API server at once
// and fill the event loop with their I/O while the leader Lease waits to be renewed.

export interface WriteQueueOptions<V> {
  write: (key: string, value: V) => Promise<void>;
  /** Combines a waiting value with a newer one for the same key (default: the newer wins). */
  merge?: (older: V, newer: V) => V;
  /** PATCHes in flight at once (default 8). */
  concurrency?: number;
}

export class WriteQueue<V> {
  private readonly waiting = new Map<string, V>();
  private inFlight = 0;
  private idleResolvers: Array<() => void> = [];
  private readonly concurrency: number;

  constructor(private readonly options: WriteQueueOptions<V>) {
    this.concurrency = Math.max(1, options.concurrency ?? 8);
  }

  /** Writes waiting (not yet sent). */
  get pending(): number {
    return this.waiting.size;
  }

  push(key: string, value: V): void {
    const older = this.waiting.get(key);
    // Re-inserting moves the key to the back: Map order is the queue order.
    if (older !== undefined) this.waiting.delete(key);
    this.waiting.set(key, older !== undefined && this.options.merge ? this.options.merge(older, value) : value);
    this.pump();
  }

  /** Resolves once nothing waits and nothing is in flight. */
  idle(): Promise<void> {
    if (this.waiting.size === 0 && this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleResolvers.push(resolve));
  }

  private pump(): void {
    while (this.inFlight < this.concurrency && this.waiting.size > 0) {
      const [key, value] = this.waiting.entries().next().value as [string, V];
      this.waiting.delete(key);
      this.inFlight++;
      void this.options
        .write(key, value)
        .catch(() => undefined)
        .finally(() => {
          this.inFlight--;
          this.pump();
          if (this.waiting.size === 0 && this.inFlight === 0)
            for (const resolve of this.idleResolvers.splice(0)) resolve();
        });
    }
  }
}
