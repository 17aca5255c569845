// `whatif --sweep --jobs N`: the VMs are independent, so the fleet is cut into N slices of
// consecutive VMs, each replayed under every value by one worker thread (replaySweepSlice), and the
// slices' outcomes are put back in the fleet's order: the rows are the same for any N.
import { parentPort, Worker } from "node:worker_threads";
import type { Policy } from "../../engine/types.js";
import type { StepGrid, VmHistory } from "./history.js";
import type { VmOutcome } from "./simulate.js";
import { replaySweepSlice } from "./sweep.js";
import { SWEEP_WORKER_ROLE } from "./sweep-role.js";

interface SliceInput {
  wsRole: typeof SWEEP_WORKER_ROLE;
  histories: VmHistory[];
  policies: Policy[];
  grid: StepGrid;
  falseStopWindowSeconds: number;
}

type SliceResult = { outcomes: VmOutcome[][] } | { error: string };

/** The worker's side: replay its slice, send the outcomes back. */
export function runSweepWorker(input: SliceInput): void {
  let result: SliceResult;
  try {
    result = {
      outcomes: replaySweepSlice(input.histories, input.policies, input.grid, input.falseStopWindowSeconds),
    };
  } catch (error) {
    result = { error: error instanceof Error ? (error.stack ?? error.message) : String(error) };
  }
  parentPort?.postMessage(result);
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

export interface SweepJobsInput {
  histories: readonly VmHistory[];
  policies: readonly Policy[];
  grid: StepGrid;
  falseStopWindowSeconds: number;
  /** Worker threads; 1 (or one VM) replays on this thread. */
  jobs: number;
  /** The script the workers run (default: the running bundle). */
  script?: string;
}

function replayInWorker(input: SweepJobsInput, histories: VmHistory[]): Promise<VmOutcome[][]> {
  const data: SliceInput = {
    wsRole: SWEEP_WORKER_ROLE,
    histories,
    policies: [...input.policies],
    grid: input.grid,
    falseStopWindowSeconds: input.falseStopWindowSeconds,
  };
  return new Promise((resolve, reject) => {
    const worker = new Worker(input.script ?? runningScript(), { workerData: data });
    let settled = false;
    worker.once("message", (result: SliceResult) => {
      settled = true;
      if ("error" in result) reject(new Error(`a sweep worker failed: ${result.error}`));
      else resolve(result.outcomes);
      void worker.terminate();
    });
    worker.once("error", (error) => {
      settled = true;
      reject(error);
    });
    worker.once("exit", (code) => {
      if (!settled) reject(new Error(`a sweep worker exited (code ${code}) without its outcomes`));
    });
  });
}

/** outcomes[policy][vm] for the whole fleet, replayed in `jobs` threads, in the fleet's order. */
export async function replaySweepJobs(input: SweepJobsInput): Promise<VmOutcome[][]> {
  const parts = slices(input.histories, input.jobs);
  if (parts.length <= 1)
    return replaySweepSlice(input.histories, input.policies, input.grid, input.falseStopWindowSeconds);
  const results = await Promise.all(parts.map((part) => replayInWorker(input, part)));
  return input.policies.map((_, policy) => results.flatMap((result) => result[policy]!));
}
