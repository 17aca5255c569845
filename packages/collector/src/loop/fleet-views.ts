// The reader side of the Fleet: what the pages, /metrics and the outreach see of each VM (its
// VmView, built from the entry by loop/view.ts), and each VM as the outreach (loop/outreach-view.ts)
// addresses it. Reads only: nothing here decides or acts.
import type { FleetCounters, VmSeriesSource, VmView } from "../model/vm-view.js";
import type { VmKey } from "../model/vm-key.js";
import type { ActionRunner } from "./actions.js";
import type { VmEntries, VmEntry } from "./fleet-entries.js";
import type { OutreachView, OutreachVm } from "./outreach-view.js";
import type { VmLoopState } from "./step.js";
import { vmView } from "./view.js";

export class FleetViews {
  constructor(
    private readonly entries: VmEntries,
    private readonly runner: ActionRunner,
    private readonly outreach: OutreachView,
  ) {}

  counters(): FleetCounters {
    return this.runner.counters;
  }

  views(nowMs: number): VmView[] {
    return this.entries.sortedEntries().map((entry) => this.viewOf(entry, nowMs));
  }

  /** The VM's loop state (record, latest Report, last decision), read-only: for per-VM pages and tests. */
  loopState(vm: VmKey): Readonly<VmLoopState> | undefined {
    return this.entries.get(vm)?.loop;
  }

  /** One view by VM, for per-VM pages. */
  view(vm: VmKey, nowMs: number): VmView | undefined {
    const entry = this.entries.get(vm);
    return entry ? this.viewOf(entry, nowMs) : undefined;
  }

  *agents(): Iterable<Pick<VmView, "connected" | "agentVersion">> {
    // As vmView says them: connected while a session is open.
    for (const entry of this.entries.values())
      yield { connected: entry.session !== undefined, agentVersion: entry.agentVersion };
  }

  *seriesSources(): Iterable<VmSeriesSource> {
    for (const entry of this.entries.sortedEntries()) {
      yield { id: entry.id, version: entry.version, view: (nowMs: number) => this.viewOf(entry, nowMs) };
    }
  }

  viewOf(entry: VmEntry, nowMs: number): VmView {
    return vmView(
      {
        key: entry.key,
        loop: entry.loop,
        connectedAtMs: entry.session?.connectedAtMs,
        agentVersion: entry.agentVersion,
        peer: entry.peer,
        policyErrors: entry.policyErrors.map((e) => `${e.key}: ${e.message}`),
        truncated: entry.truncated,
        platform: this.outreach.platformOf(entry.key),
      },
      nowMs,
    );
  }

  /** The VM as the outreach addresses it (notices, the detail page, keep links). */
  outreachVm(entry: VmEntry | undefined): OutreachVm | undefined {
    return entry
      ? {
          id: entry.id,
          key: entry.key,
          loop: entry.loop,
          session: entry.session,
          view: (nowMs) => this.viewOf(entry, nowMs),
        }
      : undefined;
  }
}
