// `whatif --sweep --jobs N`: the VMs are independent, so each batch of the fleet is cut into N slices
// of consecutive VMs, each replayed under every value by one worker thread (replaySweepSlice), and the
// slices' outcomes are put back in the fleet's order: the rows are the same for any N. The threads
// live as long as the pool, so a fleet read from Prometheus a batch at a time warms them once.
import { parentPort, Worker } from "node:worker_threads";
import type { Policy } from "../../engine/types.js";
import type { StepGrid, VmHistory } from "./history.js";
import type { VmOutcome } from "./simulate.js";
import { replaySweepSlice } from "./sweep.js";
import { SWEEP_WORKER_ROLE } from "./sweep-role.js";

/** What every thread of a pool replays under: given once, at its start. */
interface WorkerSetup {
  wsRole: typeof SWEEP_WORKER_ROLE;
  policies: Policy[];
  grid: StepGrid;
  falseStopWindowSeconds: number;
}

type SliceResult = { outcomes: VmOutcome[][] } | { error: string };

/** The worker's side: replay each slice it is sent, send the outcomes back, until the pool ends it. */
export function runSweepWorker(setup: WorkerSetup): void {
  parentPort?.on("message", (histories: VmHistory[]) => {
    let result: SliceResult;
    try {
      result = {
        outcomes: replaySweepSlice(histories, setup.policies, setup.grid, setup.falseStopWindowSeconds),
      };
    } catch (error) {
      result = { error: error instanceof Error ? (error.stack ?? error.message) : String(error) };
    }
    parentPort?.postMessage(result);
  });
}

/** The running bundle's path: the workers run the same file (main.ts starts runSweepWorker there). */
function runningScript(): string {
  return typeof __filename === "string" && __filename ? __filename : (process.argv[1] ?? "");
}

/** Consecutive slices of about equal size, at most `jobs` of them, none empty. */
export function slices<T>(items: readonly T[], jobs: number): T[][] {
  const count = Math.max(1, Math.min(Math.floor(jobs), items.length));
  const out: T[][] = [];
  for (let index = 0; index < count; index++)
    out.push(items.slice(Math.floor((index * items.length) / count), Math.floor(((index + 1) * items.length) / count)));
  return out;
}

export interface SweepPoolOptions {
  policies: readonly Policy[];
  grid: StepGrid;
  falseStopWindowSeconds: number;
  /** Worker threads; 1 (or a batch of one VM) replays on this thread. */
  jobs: number;
  /** The script the workers run (default: the running bundle). */
  script?: string;
}

/** One thread of the pool: one slice at a time. */
class SweepThread {
  private readonly worker: Worker;
  private pending?: { resolve: (outcomes: VmOutcome[][]) => void; reject: (error: Error) => void };
  private failure?: Error;

  constructor(script: string, setup: WorkerSetup) {
    this.worker = new Worker(script, { workerData: setup });
    this.worker.on("message", (result: SliceResult) => {
      const pending = this.pending;
      this.pending = undefined;
      if ("error" in result) pending?.reject(new Error(`a sweep worker failed: ${result.error}`));
      else pending?.resolve(result.outcomes);
    });
    this.worker.on("error", (error) => this.fail(error));
    this.worker.on("exit", (code) => this.fail(new Error(`a sweep worker exited (code ${code}) without its outcomes`)));
  }

  replay(histories: VmHistory[]): Promise<VmOutcome[][]> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.worker.postMessage(histories);
    });
  }

  async close(): Promise<void> {
    this.worker.removeAllListeners("exit");
    await this.worker.terminate();
  }

  private fail(error: Error): void {
    this.failure ??= error;
    const pending = this.pending;
    this.pending = undefined;
    pending?.reject(this.failure);
  }
}

/** Worker threads that replay batch after batch of the fleet under every policy; close() ends them. */
export class SweepPool {
  private readonly threads: SweepThread[] = [];

  constructor(private readonly options: SweepPoolOptions) {}

  /** outcomes[policy][vm] for this batch, in its order. */
  async replay(histories: readonly VmHistory[]): Promise<VmOutcome[][]> {
    const { options } = this;
    const parts = slices(histories, options.jobs);
    if (parts.length <= 1)
      return replaySweepSlice(histories, options.policies, options.grid, options.falseStopWindowSeconds);
    while (this.threads.length < parts.length)
      this.threads.push(
        new SweepThread(options.script ?? runningScript(), {
          wsRole: SWEEP_WORKER_ROLE,
          policies: [...options.policies],
          grid: options.grid,
          falseStopWindowSeconds: options.falseStopWindowSeconds,
        }),
      );
    const results = await Promise.all(parts.map((part, index) => this.threads[index]!.replay(part)));
    return options.policies.map((_, policy) => results.flatMap((result) => result[policy]!));
  }

  async close(): Promise<void> {
    await Promise.all(this.threads.splice(0).map((thread) => thread.close()));
  }
}

export interface SweepJobsInput extends SweepPoolOptions {
  histories: readonly VmHistory[];
}

/** outcomes[policy][vm] for these histories, replayed in `jobs` threads, in their order. */
export async function replaySweepJobs(input: SweepJobsInput): Promise<VmOutcome[][]> {
  const pool = new SweepPool(input);
  try {
    return await pool.replay(input.histories);
  } finally {
    await pool.close();
  }
}
