// A bounded per-VM history for the VM page: the last transitions with their
// reasons, and chart points (idle clock, activity) over the last hours. Fixed
// memory per VM: a ring of typed arrays for points, a short list of
// transitions. Pure bookkeeping: times are passed in.
import { type VmKey, vmId } from "../model/vm-key.js";
import type { EngineState } from "../engine/types.js";
import { ENGINE_STATES } from "../engine/types.js";

export interface HistoryTransition {
  atMs: number;
  /** "Active → StoppingPending", "notice", "cancel", "stop", ... */
  what: string;
  reason: string;
}

export interface ChartPoint {
  atMs: number;
  /** The idle clock at that moment (seconds since the last activity); NaN when unknown. */
  idleSeconds: number;
  /** How many signals showed activity. */
  activeSignals: number;
  state: EngineState;
}

export interface HistoryOptions {
  /** Points closer together than this are merged (the latest wins). */
  pointSpacingMs: number;
  /** Points kept per VM: spacing × points is the chart's span. */
  pointsPerVm: number;
  transitionsPerVm: number;
}

export const DEFAULT_HISTORY: HistoryOptions = { pointSpacingMs: 30_000, pointsPerVm: 480, transitionsPerVm: 30 };

class PointRing {
  private readonly times: Float64Array;
  private readonly idle: Float32Array;
  private readonly active: Uint8Array;
  private readonly states: Uint8Array;
  private next = 0;
  private size = 0;

  constructor(private readonly capacity: number) {
    this.times = new Float64Array(capacity);
    this.idle = new Float32Array(capacity);
    this.active = new Uint8Array(capacity);
    this.states = new Uint8Array(capacity);
  }

  add(point: ChartPoint, spacingMs: number): void {
    const state = Math.max(0, ENGINE_STATES.indexOf(point.state));
    const last = this.size > 0 ? (this.next - 1 + this.capacity) % this.capacity : -1;
    // Within the spacing of the last point and nothing changed (state, activity): skip it, so the
    // ring covers the configured span. Changes always get a point: the chart shows each reset.
    if (
      last >= 0 &&
      point.atMs - this.times[last]! < spacingMs &&
      this.states[last] === state &&
      this.active[last]! > 0 === point.activeSignals > 0
    )
      return;
    const index = this.next;
    this.times[index] = point.atMs;
    this.idle[index] = point.idleSeconds;
    this.active[index] = Math.min(255, point.activeSignals);
    this.states[index] = state;
    this.next = (this.next + 1) % this.capacity;
    this.size = Math.min(this.capacity, this.size + 1);
  }

  points(sinceMs: number): ChartPoint[] {
    const out: ChartPoint[] = [];
    for (let i = 0; i < this.size; i++) {
      const index = (this.next - this.size + i + this.capacity) % this.capacity;
      if (this.times[index]! < sinceMs) continue;
      out.push({
        atMs: this.times[index]!,
        idleSeconds: this.idle[index]!,
        activeSignals: this.active[index]!,
        state: ENGINE_STATES[this.states[index]!]!,
      });
    }
    return out;
  }
}

/** The ring of a VM whose points were shed: holds nothing, shared by all. */
const EMPTY_RING = new PointRing(0);

interface VmHistory {
  ring: PointRing;
  transitions: HistoryTransition[];
}

export class History {
  private readonly vms = new Map<string, VmHistory>();
  /** False while the memory guard sheds (lib/memory/guard.ts): chart points are neither kept nor recorded. */
  private recordingPoints = true;

  constructor(private readonly options: HistoryOptions = DEFAULT_HISTORY) {}

  /** Near the memory limit: drops every VM's chart points (transitions stay) and records none until resume(). */
  shed(): void {
    this.recordingPoints = false;
    for (const entry of this.vms.values()) entry.ring = EMPTY_RING;
  }

  resume(): void {
    this.recordingPoints = true;
  }

  private of(vm: VmKey): VmHistory {
    let entry = this.vms.get(vmId(vm));
    if (!entry) {
      entry = { ring: this.recordingPoints ? new PointRing(this.options.pointsPerVm) : EMPTY_RING, transitions: [] };
      this.vms.set(vmId(vm), entry);
    }
    return entry;
  }

  point(vm: VmKey, point: ChartPoint): void {
    if (!this.recordingPoints) return;
    const entry = this.of(vm);
    if (entry.ring === EMPTY_RING) entry.ring = new PointRing(this.options.pointsPerVm);
    entry.ring.add(point, this.options.pointSpacingMs);
  }

  transition(vm: VmKey, transition: HistoryTransition): void {
    const list = this.of(vm).transitions;
    list.push({ ...transition, reason: transition.reason.slice(0, 300) });
    if (list.length > this.options.transitionsPerVm) list.splice(0, list.length - this.options.transitionsPerVm);
  }

  /** Newest first. */
  transitions(vm: VmKey): HistoryTransition[] {
    return [...(this.vms.get(vmId(vm))?.transitions ?? [])].reverse();
  }

  points(vm: VmKey, sinceMs: number): ChartPoint[] {
    return this.vms.get(vmId(vm))?.ring.points(sinceMs) ?? [];
  }

  forget(vm: VmKey): void {
    this.vms.delete(vmId(vm));
  }
}
