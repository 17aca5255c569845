// How often ws is wrong, per profile (issue 38 item 2), as the collector itself saw it: ws's
// accepted stops, the VMs active again within 15 minutes of one (the condition of the alert
// WorkstationLikelyFalseStop and of the recording rules), and the stops their user disputed, over
// the last 7 and 30 days. For the fleet page and /api/rates. In memory: after a restart the
// windows start again (each row says since when); the shipped recording rules over Prometheus'
// history are the durable figures (docs/metrics.md, "How often ws is wrong"). Pure: times come in.
import { type VmKey, vmId } from "../../model/vm-key.js";

export const QUICK_RETURN_MS = 15 * 60_000;
export const RATE_WINDOWS = [
  { window: "7d", ms: 7 * 86_400_000 },
  { window: "30d", ms: 30 * 86_400_000 },
] as const;

type Kind = "stop" | "return" | "dispute";

export interface WrongStopRate {
  profile: string;
  window: "7d" | "30d";
  stops: number;
  quickReturns: number;
  disputes: number;
  /** Per 100 stops; null without stops in the window. */
  quickReturnsPer100: number | null;
  disputesPer100: number | null;
  /** Where the window really starts: its start, or the collector's when it started later. */
  sinceMs: number;
}

export class WrongStopLedger {
  private readonly events: Array<{ kind: Kind; profile: string; atMs: number }> = [];
  /** ws's last accepted stop per VM, until a return is counted or 15 minutes pass. */
  private readonly lastStop = new Map<string, { atMs: number; profile: string }>();

  constructor(private readonly startedAtMs: number) {}

  stopped(vm: VmKey, profile: string, atMs: number): void {
    this.add("stop", profile, atMs);
    this.lastStop.set(vmId(vm), { atMs, profile });
  }

  /** The VM is active (a person or accepted work): a return when within 15 minutes of ws's stop; counted once. */
  active(vm: VmKey, atMs: number): void {
    const stop = this.lastStop.get(vmId(vm));
    if (!stop) return;
    this.lastStop.delete(vmId(vm));
    if (atMs - stop.atMs <= QUICK_RETURN_MS) this.add("return", stop.profile, atMs);
  }

  disputed(profile: string, atMs: number): void {
    this.add("dispute", profile, atMs);
  }

  forget(vm: VmKey): void {
    this.lastStop.delete(vmId(vm));
  }

  private add(kind: Kind, profile: string, atMs: number): void {
    this.events.push({ kind, profile, atMs });
    this.prune(atMs);
  }

  /** Events are kept for the longest window only; stops for their 15 minutes. */
  private prune(nowMs: number): void {
    const oldest = nowMs - RATE_WINDOWS[RATE_WINDOWS.length - 1]!.ms;
    while (this.events.length && this.events[0]!.atMs <= oldest) this.events.shift();
    for (const [id, stop] of this.lastStop) if (nowMs - stop.atMs > QUICK_RETURN_MS) this.lastStop.delete(id);
  }

  /** One row per profile seen and window, profiles sorted ("" is the defaults). */
  rates(nowMs: number): WrongStopRate[] {
    this.prune(nowMs);
    const profiles = [...new Set(this.events.map((e) => e.profile))].sort();
    const rows: WrongStopRate[] = [];
    for (const profile of profiles)
      for (const { window, ms } of RATE_WINDOWS) {
        const from = nowMs - ms;
        const count = (kind: Kind) =>
          this.events.filter((e) => e.profile === profile && e.kind === kind && e.atMs > from && e.atMs <= nowMs)
            .length;
        const stops = count("stop");
        const quickReturns = count("return");
        const disputes = count("dispute");
        const per100 = (n: number) => (stops > 0 ? Math.round((10_000 * n) / stops) / 100 : null);
        rows.push({
          profile,
          window,
          stops,
          quickReturns,
          disputes,
          quickReturnsPer100: per100(quickReturns),
          disputesPer100: per100(disputes),
          sinceMs: Math.max(from, this.startedAtMs),
        });
      }
    return rows;
  }
}
