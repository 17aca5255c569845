// Where the GPU went (issue 36 item 4): a start the scheduler cannot place is told to its owner
// once, with the scheduler's own message and how long it has waited, and the owner is told again
// when it is finally placed. Pure: the attempt's memory and the start's progress in, what to say out.
import type { StartProgress } from "../start/progress.js";

export interface PlacementMemory {
  /** When this start was first seen unschedulable (ms); set once per start. */
  unplacedSinceMs?: number;
  /** The owner was told it was placed. */
  placedTold?: boolean;
  /** The scheduler's message while it could not place this start (the welcome back repeats it). */
  unplacedMessage?: string;
  /** Seconds from the request to placed, once an unplaced start was placed. */
  placedAfterSeconds?: number;
}

export type PlacementNews =
  | { kind: "unplaced"; message: string; reason: string; waitedSeconds: number }
  | { kind: "placed"; waitedSeconds: number; node?: string };

/** What to tell now of this start's placement, if anything; updates `memory`. */
export function placementNews(
  memory: PlacementMemory,
  progress: StartProgress,
  requestedAtMs: number,
  nowMs: number,
): PlacementNews | undefined {
  if (progress.unschedulable && memory.unplacedSinceMs === undefined) {
    memory.unplacedSinceMs = nowMs;
    memory.unplacedMessage = progress.unschedulable.message;
    return { kind: "unplaced", ...progress.unschedulable };
  }
  const scheduled = progress.stages.find((stage) => stage.name === "scheduled");
  if (memory.unplacedSinceMs !== undefined && !memory.placedTold && scheduled?.state === "done") {
    memory.placedTold = true;
    const atMs = scheduled.atMs ?? nowMs;
    memory.placedAfterSeconds = Math.max(0, (atMs - requestedAtMs) / 1000);
    return {
      kind: "placed",
      waitedSeconds: memory.placedAfterSeconds,
      ...(scheduled.detail ? { node: scheduled.detail.replace(/^on node /, "") } : {}),
    };
  }
  return undefined;
}
