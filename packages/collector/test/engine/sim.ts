// Helpers for engine tests: Reports built with the real generated schema, and a
// small driver that calls decide() the way the collector does (on each Report
// and on a timer), with a virtual clock.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { ReportSchema, SessionKind, SourceState, type Report } from "@ws/protocol";
import { decide } from "../../src/engine/decide.js";
import { BUILTIN_DEFAULT_POLICY, mergePolicy } from "../../src/engine/policy.js";
import type {
  Action,
  Decision,
  HostReading,
  Observation,
  Policy,
  PolicyOverrides,
  StopResult,
  VmRecord,
} from "../../src/engine/types.js";

export const SECOND = 1000;
export const MINUTE = 60 * SECOND;
export const HOUR = 60 * MINUTE;
export const T0 = Date.UTC(2025, 0, 6, 9, 0, 0);

type ReportInit = MessageInitShape<typeof ReportSchema>;

const ALL_SOURCES = ["jupyter", "sessions", "code_server", "gpu", "system", "inhibitors", "leases", "disk"];

/** A Report in which every source read fine; `init` adds signals and may replace `sources`. */
export function report(init: ReportInit = {}): Report {
  const defaults: ReportInit = {
    sequence: 1n,
    intervalSeconds: 15,
    sources: ALL_SOURCES.map((source) => ({ source, state: SourceState.OK })),
    system: {
      cpuCount: 4,
      cpuBusyRatio: 0.02,
      userProcessCpuCores: 0.01,
      networkReceiveBytesPerSecond: 200,
      networkTransmitBytesPerSecond: 300,
      uptimeSeconds: 86_400,
    },
  };
  return create(ReportSchema, { ...defaults, ...init } as ReportInit);
}

/** A terminal session whose last keystroke was `inputAgeSeconds` before the sample. */
export function ttySession(
  inputAgeSeconds: number | undefined,
  extra: { tty?: string; user?: string; outputAgeSeconds?: number } = {},
) {
  return {
    kind: SessionKind.UTMP,
    user: extra.user ?? "alice",
    uid: 1000,
    tty: extra.tty ?? "pts/0",
    remoteHost: "10.0.0.9",
    pid: 4242,
    loginAgeSeconds: 3600,
    ...(inputAgeSeconds !== undefined ? { inputAgeSeconds } : {}),
    ...(extra.outputAgeSeconds !== undefined ? { outputAgeSeconds: extra.outputAgeSeconds } : {}),
  };
}

export function sources(overrides: Record<string, { state: SourceState; message?: string }>) {
  return ALL_SOURCES.map((source) => ({
    source,
    state: overrides[source]?.state ?? SourceState.OK,
    message: overrides[source]?.message ?? "",
  }));
}

export function testPolicy(overrides: PolicyOverrides = {}): Policy {
  return mergePolicy(
    {
      ...BUILTIN_DEFAULT_POLICY,
      autostopEnabled: true,
      idleTimeoutSeconds: 3600,
      gracePeriodSeconds: 600,
      agentLostAfterSeconds: 300,
      noticeRepeatSeconds: 300,
    },
    overrides,
  );
}

export class Sim {
  now = T0;
  record: VmRecord | undefined;
  latest: Observation["latestReport"];
  connected = true;
  vmRunning: boolean | undefined;
  /** The agent's goodbye while it is not connected (undefined: it vanished, or is connected). */
  goodbye: string | undefined;
  /** The host-side reading passed with every decision (undefined: host-side evidence not configured). */
  host: HostReading | undefined;
  decisions: Decision[] = [];
  private pendingStopResult: StopResult | undefined;
  policyStatus: Observation["policyStatus"];
  /** The schedule's next stop-by, as the loop passes it (a function of the clock; undefined: none). */
  stopBy: ((nowMs: number) => number | undefined) | undefined;

  constructor(
    public policy: Policy = testPolicy(),
    record?: VmRecord,
  ) {
    this.record = record;
  }

  /** A Report arrives now. */
  send(r: Report): Decision {
    this.latest = { report: r, receivedAtMs: this.now };
    return this.step();
  }

  step(): Decision {
    const observation: Observation = {
      agentConnected: this.connected,
      ...(this.latest ? { latestReport: this.latest } : {}),
      ...(this.vmRunning !== undefined ? { vmRunning: this.vmRunning } : {}),
      ...(this.pendingStopResult ? { stopResult: this.pendingStopResult } : {}),
      ...(this.policyStatus ? { policyStatus: this.policyStatus } : {}),
      ...(this.host ? { host: this.host } : {}),
      ...(this.goodbye !== undefined && !this.connected ? { agentGoodbye: this.goodbye } : {}),
      ...(this.stopBy?.(this.now) !== undefined ? { nextStopByMs: this.stopBy(this.now) } : {}),
    };
    this.pendingStopResult = undefined;
    const decision = decide(this.now, this.policy, observation, this.record);
    this.record = decision.next;
    this.decisions.push(decision);
    return decision;
  }

  stopResult(result: StopResult): Decision {
    this.pendingStopResult = result;
    return this.step();
  }

  /**
   * Moves the clock by `ms`, deciding every `tickMs` and, when `reportEvery`
   * is given, sending `makeReport()` at that cadence. Returns the decisions.
   */
  advance(
    ms: number,
    options: { tickMs?: number; reportEveryMs?: number; makeReport?: () => Report } = {},
  ): Decision[] {
    const tick = options.tickMs ?? 15 * SECOND;
    const end = this.now + ms;
    const out: Decision[] = [];
    let nextReport = options.reportEveryMs !== undefined ? this.now + options.reportEveryMs : Infinity;
    while (this.now < end) {
      this.now = Math.min(end, this.now + tick);
      if (options.makeReport && this.now >= nextReport) {
        out.push(this.send(options.makeReport()));
        nextReport += options.reportEveryMs ?? Infinity;
      } else {
        out.push(this.step());
      }
    }
    return out;
  }

  /** Idle reports (no input for a long time) every 15 s for `ms`. */
  idleFor(
    ms: number,
    makeReport: () => Report = () => report({ sessions: { sessions: [ttySession(99_999)] } }),
  ): Decision[] {
    return this.advance(ms, { reportEveryMs: 15 * SECOND, makeReport });
  }

  get state() {
    return this.record?.state;
  }
}

export function actionsOf<K extends Action["kind"]>(
  decisions: Decision | Decision[],
  kind: K,
): Array<Extract<Action, { kind: K }>> {
  const list = Array.isArray(decisions) ? decisions : [decisions];
  return list.flatMap((decision) =>
    decision.actions.filter((action): action is Extract<Action, { kind: K }> => action.kind === kind),
  );
}

export function transitions(decisions: Decision[]): string[] {
  return decisions
    .filter((d) => d.explanation.from !== d.explanation.to)
    .map((d) => `${d.explanation.from}→${d.explanation.to}`);
}
