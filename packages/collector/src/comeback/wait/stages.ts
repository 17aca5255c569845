// The wait of a return, split where the time went (issue 36 item 3): a person asked for a stopped
// VM (the start link, its address, the ssh helper, …) and waited until its entry service answered.
// Pure: the starting page's stages (progress.ts) and the start's times in, seconds per stage out.
import type { Stage } from "../start/progress.js";

/**
 * The stages of a wait, in order. Bounded label values:
 * - `placement`: requested → the VMI scheduled on a node (waiting for a node or a GPU);
 * - `boot`: scheduled → the VMI running;
 * - `guest`: running → the agent's stream open (the guest booted and started its services);
 * - `report`: agent connected → the Report that showed the entry service up;
 * - `total`: requested → ready, what the person waited.
 */
export type WaitStage = "placement" | "boot" | "guest" | "report" | "total";
export const WAIT_STAGES: readonly WaitStage[] = ["placement", "boot", "guest", "report", "total"];

/** The paths a return comes by, as the wait histograms label them. */
export type WaitTrigger = "link" | "wake" | "ssh" | "schedule" | "warm" | "standalone";
export const WAIT_TRIGGERS: readonly WaitTrigger[] = ["link", "wake", "ssh", "schedule", "warm", "standalone"];

/** A start's trigger as a wait label: the workstation's own address is the wake path; unknown ones are `standalone`. */
export function waitTriggerOf(trigger: string): WaitTrigger {
  if (trigger === "address") return "wake";
  return (WAIT_TRIGGERS as readonly string[]).includes(trigger) ? (trigger as WaitTrigger) : "standalone";
}

export type WaitSplit = Record<WaitStage, number>;

/** A return that found the VM already running and ready: the person waited for nothing. */
export const ZERO_WAIT: WaitSplit = { placement: 0, boot: 0, guest: 0, report: 0, total: 0 };

/**
 * Seconds per stage from `requestedAtMs` to `readyAtMs`. A stage whose time the platform did not
 * show (an inventory that skipped `Scheduled`, a VMI already running) takes the time of the next
 * stage that has one, so the stages always add up to the total and none is negative.
 */
export function splitWait(stages: readonly Stage[], requestedAtMs: number, readyAtMs: number): WaitSplit {
  const end = Math.max(readyAtMs, requestedAtMs);
  const at = (name: Stage["name"]): number | undefined => stages.find((stage) => stage.name === name)?.atMs;
  // Each boundary clamped between the one before it and the ready time.
  const bounds: number[] = [];
  let previous = requestedAtMs;
  const raw = [at("scheduled"), at("running"), at("agent")];
  for (let index = 0; index < raw.length; index++) {
    const known = raw.slice(index).find((value) => value !== undefined) ?? end;
    const bound = Math.min(end, Math.max(previous, known));
    bounds.push(bound);
    previous = bound;
  }
  const [scheduled = end, running = end, agent = end] = bounds;
  const seconds = (from: number, to: number): number => (to - from) / 1000;
  return {
    placement: seconds(requestedAtMs, scheduled),
    boot: seconds(scheduled, running),
    guest: seconds(running, agent),
    report: seconds(agent, end),
    total: seconds(requestedAtMs, end),
  };
}
