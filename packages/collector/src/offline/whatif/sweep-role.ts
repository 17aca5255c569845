// How main.ts knows it runs as one of a sweep's worker threads (sweep-workers.ts), without loading
// the sweep first: the same bundle is the workers' script.

export const SWEEP_WORKER_ROLE = "whatif-sweep";

export function isSweepWorker(workerData: unknown): boolean {
  return (workerData as { wsRole?: unknown } | null)?.wsRole === SWEEP_WORKER_ROLE;
}
