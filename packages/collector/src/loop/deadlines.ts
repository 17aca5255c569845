// Deadlines per VM on one timer: a binary min-heap of (time, VM), one OS timer
// armed for the earliest, like controller-runtime's RequeueAfter. Nothing scans
// every VM. Rescheduling a VM supersedes its earlier entry (lazy deletion: the
// stale heap entry is skipped when it surfaces). Due VMs are handed out in
// slices that yield to the event loop between them, so a thousand deadlines at
// the same instant (a new leader resuming every VM) cannot hold the loop.

export interface DeadlineTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Runs callback after pending I/O (setImmediate); the slices yield through it. */
  yield(callback: () => void): void;
}

export const systemDeadlineTimers: DeadlineTimers = {
  setTimeout: (callback, ms) => {
    const handle = setTimeout(callback, ms);
    handle.unref?.();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  yield: (callback) => void setImmediate(callback),
};

interface Entry<K> {
  atMs: number;
  key: K;
  seq: number;
}

export interface DeadlineQueueOptions<K> {
  nowMs: () => number;
  timers?: DeadlineTimers;
  /** Called for each VM whose deadline has come (at most once per schedule()). */
  fire: (key: K, nowMs: number) => void;
  /** Due VMs handled per slice before yielding (default 256). */
  sliceSize?: number;
  /** Setting an OS timer further out than this is capped (setTimeout overflows past 2^31 ms). */
  maxTimerMs?: number;
}

export class DeadlineQueue<K> {
  private readonly heap: Entry<K>[] = [];
  private readonly current = new Map<K, Entry<K>>();
  private readonly timers: DeadlineTimers;
  private readonly sliceSize: number;
  private readonly maxTimerMs: number;
  private seq = 0;
  private armedAtMs: number | undefined;
  private handle: unknown = null;
  private draining = false;
  private stopped = false;

  constructor(private readonly options: DeadlineQueueOptions<K>) {
    this.timers = options.timers ?? systemDeadlineTimers;
    this.sliceSize = Math.max(1, options.sliceSize ?? 256);
    this.maxTimerMs = options.maxTimerMs ?? 24 * 3_600_000;
  }

  /** VMs with a pending deadline. */
  get size(): number {
    return this.current.size;
  }

  /** When `key` is due next, if it is scheduled. */
  dueAt(key: K): number | undefined {
    return this.current.get(key)?.atMs;
  }

  /** Sets (or with undefined clears) the one deadline of `key`; an earlier one is replaced. */
  schedule(key: K, atMs: number | undefined): void {
    if (atMs === undefined || !Number.isFinite(atMs)) {
      this.current.delete(key);
      return;
    }
    const existing = this.current.get(key);
    if (existing && existing.atMs === atMs) return;
    const entry: Entry<K> = { atMs, key, seq: ++this.seq };
    this.current.set(key, entry);
    this.push(entry);
    this.compactIfStale();
    this.arm();
  }

  cancel(key: K): void {
    this.current.delete(key);
  }

  /** Stops firing; pending deadlines are kept (start() resumes them). */
  stop(): void {
    this.stopped = true;
    if (this.handle !== null) this.timers.clearTimeout(this.handle);
    this.handle = null;
    this.armedAtMs = undefined;
  }

  start(): void {
    this.stopped = false;
    this.arm();
  }

  private arm(): void {
    if (this.stopped || this.draining) return;
    const next = this.peekLive();
    if (!next) return;
    if (this.armedAtMs !== undefined && this.armedAtMs <= next.atMs) return;
    if (this.handle !== null) this.timers.clearTimeout(this.handle);
    const delay = Math.min(this.maxTimerMs, Math.max(0, next.atMs - this.options.nowMs()));
    this.armedAtMs = next.atMs;
    this.handle = this.timers.setTimeout(() => {
      this.handle = null;
      this.armedAtMs = undefined;
      this.drain();
    }, delay);
  }

  private drain(): void {
    if (this.stopped) return;
    this.draining = true;
    const now = this.options.nowMs();
    let handled = 0;
    for (;;) {
      const next = this.peekLive();
      if (!next || next.atMs > now) break;
      if (handled >= this.sliceSize) {
        // Yield to I/O (lease renewals, Reports), then continue with the same clock reading's successors.
        this.timers.yield(() => this.drain());
        return;
      }
      this.pop();
      this.current.delete(next.key);
      handled++;
      try {
        this.options.fire(next.key, now);
      } catch {
        // fire() reports its own failures; one VM's error must not stop the others' deadlines.
      }
    }
    this.draining = false;
    this.arm();
  }

  /** The earliest entry that is still its key's current deadline (stale ones are dropped on the way). */
  private peekLive(): Entry<K> | undefined {
    while (this.heap.length > 0) {
      const top = this.heap[0]!;
      if (this.current.get(top.key) === top) return top;
      this.pop();
    }
    return undefined;
  }

  /** Rebuilds the heap when stale entries outnumber live ones (a VM rescheduled on every Report). */
  private compactIfStale(): void {
    if (this.heap.length < 1024 || this.heap.length < 4 * this.current.size) return;
    this.heap.length = 0;
    for (const entry of this.current.values()) this.push(entry);
  }

  private push(entry: Entry<K>): void {
    const heap = this.heap;
    heap.push(entry);
    let index = heap.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!before(heap[index]!, heap[parent]!)) break;
      [heap[index], heap[parent]] = [heap[parent]!, heap[index]!];
      index = parent;
    }
  }

  private pop(): void {
    const heap = this.heap;
    const last = heap.pop();
    if (last === undefined || heap.length === 0) return;
    heap[0] = last;
    let index = 0;
    for (;;) {
      const left = 2 * index + 1;
      const right = left + 1;
      let smallest = index;
      if (left < heap.length && before(heap[left]!, heap[smallest]!)) smallest = left;
      if (right < heap.length && before(heap[right]!, heap[smallest]!)) smallest = right;
      if (smallest === index) break;
      [heap[index], heap[smallest]] = [heap[smallest]!, heap[index]!];
      index = smallest;
    }
  }
}

function before<K>(a: Entry<K>, b: Entry<K>): boolean {
  return a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);
}
