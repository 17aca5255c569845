import type { Clock } from "../clock.js";
import type { Roots } from "../roots.js";
import type { Users } from "../users.js";

/** The signal families of a Report; also the `source` names in SourceStatus (one table: @ws/protocol). */
export type { SourceName } from "@ws/protocol";
import type { SourceName } from "@ws/protocol";

/** What one collect() found. A source never throws into the sampler: it returns failed. */
export type SignalOutcome<T> =
  | { state: "ok"; value: T; message?: string }
  | { state: "absent"; message: string }
  | { state: "failed"; message: string; value?: T };

/** Everything a signal may read the world through. */
export interface SignalContext {
  roots: Roots;
  clock: Clock;
  users: Users;
  /** Abort when the sample's time budget is spent (a hung Jupyter server must not hold the Report). */
  signal: AbortSignal;
}

/**
 * One source of activity, node_exporter style: a thin I/O part in collect(),
 * a pure parser beside it. Signals that need deltas (CPU, network) keep their
 * previous reading in the closure of their factory.
 */
export interface Signal<T> {
  readonly name: SourceName;
  collect(ctx: SignalContext): Promise<SignalOutcome<T>>;
}

export const ok = <T>(value: T, message?: string): SignalOutcome<T> =>
  message === undefined ? { state: "ok", value } : { state: "ok", value, message };
export const absent = <T>(message: string): SignalOutcome<T> => ({ state: "absent", message });
export const failed = <T>(message: string): SignalOutcome<T> => ({ state: "failed", message });

/** Kept here too because every signal imports its helpers from this file; the one definition is in @ws/protocol. */
export { errorMessage } from "@ws/protocol";
