// A live Fleet on a virtual clock, with agent sessions that record the Directives they get:
// the collector's real loop and scheduling, driven by a test instead of gRPC.
import { create } from "@bufbuild/protobuf";
import { HelloSchema, type Directive, type Report } from "@ws/protocol";
import type { AgentSession } from "../../src/agents/server.js";
import type { VmKey } from "../../src/model/vm-key.js";
import type { Decision, EngineState, Policy, StopResult } from "../../src/engine/types.js";
import { Fleet } from "../../src/loop/fleet.js";
import { staticPolicySource } from "../../src/model/policy-source.js";
import { VirtualClock } from "./virtual-clock.js";

export interface TestSession extends AgentSession {
  directives: Directive[];
  closed?: { code: number; details: string };
}

/** One decision that changed something (state, notice, lease, event), as the observer saw it. */
export interface SeenDecision {
  vm: VmKey;
  atMs: number;
  from: EngineState;
  to: EngineState;
  decision: Decision;
}

export function startFleet(
  policy: Policy,
  startMs: number,
  stopResult: StopResult = { outcome: "accepted", message: "test" },
  /** Options of the Fleet beyond the harness's own (the platform's details of each VM, say). */
  more: Partial<ConstructorParameters<typeof Fleet>[0]> = {},
) {
  const clock = new VirtualClock(startMs);
  const transitions: SeenDecision[] = [];
  const stops: Array<{ vm: VmKey; atMs: number }> = [];
  const logs: string[] = [];
  const fleet = new Fleet({
    log: (_level, message) => logs.push(message),
    nowMs: clock.now,
    timers: clock,
    authenticate: () => ({ ok: true }),
    policySource: staticPolicySource(policy, {}, "workstation.aik8s.run/", {}),
    actuator: {
      stop: async (vm) => {
        stops.push({ vm, atMs: clock.nowMs });
        return stopResult;
      },
      event: () => {},
      persist: () => {},
    },
    // The one hook every edge uses: here it only records what changed.
    observer: {
      decided: (vm, decision, previous, _policy, atMs) => {
        const from = previous?.state ?? "Unknown";
        if (from !== decision.next.state || decision.actions.length > 0)
          transitions.push({ vm, atMs, from, to: decision.next.state, decision });
      },
      stopped: () => {},
      deliversNotice: () => true,
      noticeLink: () => undefined,
      owner: () => "",
      forget: () => {},
    },
    ...more,
  });
  fleet.start();
  const connect = (vm: VmKey, capabilities: string[] = []): TestSession => {
    const session: TestSession = {
      vm,
      hello: create(HelloSchema, { vm, token: "t", agentVersion: "test", capabilities }),
      peer: "127.0.0.1:1",
      connectedAtMs: clock.nowMs,
      directives: [],
      send(directive) {
        this.directives.push(directive);
      },
      close(code, details) {
        this.closed = { code, details };
      },
    };
    fleet.connected(session);
    return session;
  };
  const report = (session: TestSession, value: Report) => fleet.report(session, value, clock.nowMs);
  return { clock, fleet, transitions, stops, logs, connect, report };
}
