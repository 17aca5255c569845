// The welcome back: when a VM ws stopped runs again, the first Directive its agent gets carries
// the last stop's explanation, for the first person who logs in (the agent shows it once per
// stop, docs/coming-back.md): when, after how long idle, the last activity ws saw, how to keep
// it next time, and where to say the stop was a mistake. Pure.
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { WelcomeBackSchema } from "@ws/protocol";
import { DISPUTE_WINDOW_MS, disputeOpen } from "./dispute.js";
import type { PlacementMemory } from "../wait/placement.js";
import type { LastStopFacts } from "./platform.js";

export type WelcomeFields = MessageInitShape<typeof WelcomeBackSchema>;

/** What a welcome back advises: a lease long enough for a working day. */
export const WELCOME_KEEP_HINT = 'ws-lease 8h --reason "what you are running"';

/**
 * The welcome for an agent of boot `bootId` that connects at `nowMs`, or undefined when there is
 * nothing to say: no stop recorded, the stopped boot itself reconnecting (a stop in progress, a
 * collector restart), a stop in the future of this clock, or one too old. `placement`: the start
 * that brought it back, when the scheduler made it wait (the welcome says for how long and why).
 */
export function welcomeBack(
  stop: LastStopFacts | null | undefined,
  bootId: string,
  nowMs: number,
  disputeUrl?: string,
  placement?: PlacementMemory,
): WelcomeFields | undefined {
  if (!stop || !Number.isFinite(stop.atMs)) return undefined;
  // A stop older than the dispute window is history: its VM has been used since.
  if (stop.atMs > nowMs || nowMs - stop.atMs > DISPUTE_WINDOW_MS) return undefined;
  // The stopped boot's own agent (reconnecting while the guest shuts down) gets no welcome.
  if (stop.bootId !== undefined && stop.bootId === bootId) return undefined;
  return {
    id: `stop-${Math.round(stop.atMs)}`,
    stoppedAtUnixSeconds: stop.atMs / 1000,
    reason: stop.reason,
    ...(stop.idleSeconds !== undefined ? { idleSeconds: stop.idleSeconds } : {}),
    lastActivity: stop.lastActivity?.what ?? "",
    ...(stop.lastActivity ? { lastActivityAtUnixSeconds: stop.lastActivity.atMs / 1000 } : {}),
    keepHint: WELCOME_KEEP_HINT,
    // The link's page shows the dispute form whatever the VM's state, while the window is open.
    disputeUrl: disputeOpen(stop, nowMs) && disputeUrl ? disputeUrl : "",
    ...(placement?.placedAfterSeconds !== undefined
      ? { placementWaitSeconds: placement.placedAfterSeconds, placementMessage: placement.unplacedMessage ?? "" }
      : {}),
  };
}
