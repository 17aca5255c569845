// Outreach: decisions and stop outcomes become history and webhooks (to a
// real loopback receiver); observe mode sends nothing unless observe-notices.
import { afterEach, describe, expect, it } from "vitest";
import { webhookReceiver, type WebhookReceiver } from "../../../../../test/support/webhook-receiver.js";
import { BUILTIN_DEFAULT_POLICY } from "../../../src/engine/policy.js";
import type { Decision, Policy } from "../../../src/engine/types.js";
import { deriveLinkKey } from "../../../src/links/keep-token.js";
import { parseNotificationsConfig } from "../../../src/outreach/notify/config.js";
import { Outreach } from "../../../src/outreach/notify/outreach.js";

let receiver: WebhookReceiver;
afterEach(() => receiver?.close());

const vm = { namespace: "lab", name: "gpu-1" };
const NOW = Date.parse("2026-12-01T10:00:00Z");

function outreach(send?: string[]) {
  const config = parseNotificationsConfig(
    { publicUrl: "https://ws.example.com", webhooks: [{ url: `${receiver.url}/json` }], ...(send ? { send } : {}) },
    [],
  );
  return new Outreach({
    config,
    log: () => {},
    metadataFor: () => ({ labels: { "platform.example.com/user": "alice" }, annotations: {} }),
    prefix: "workstation.aik8s.run/",
    linkKey: deriveLinkKey(Buffer.from("a collector token key of enough length, for tests")),
  });
}

function noticeDecision(mode: "enforce" | "observe"): Decision {
  return {
    summary: "StoppingPending",
    actions: [
      {
        kind: "notice",
        id: "n-1",
        deadlineMs: NOW + 600_000,
        stopInSeconds: 600,
        idleSeconds: 7200,
        reason: "idle for 2h",
        hint: "ws-lease 2h",
        mode,
        repeat: false,
      },
    ],
    next: { state: "StoppingPending", activeSignals: [], clock: { lastActivityAtMs: NOW - 7_200_000 } },
  } as unknown as Decision;
}

const policy = (over: Partial<Policy> = {}): Policy => ({ ...BUILTIN_DEFAULT_POLICY, ...over });

describe("Outreach", () => {
  it("a notice goes out with its keep link and is recorded; a refused stop goes out with the refusal", async () => {
    receiver = await webhookReceiver();
    const o = outreach(["notice", "refused-stop"]);
    o.decided(vm, noticeDecision("enforce"), { state: "Active" } as never, policy(), NOW);
    o.stopped(
      vm,
      { outcome: "refused", message: "disk rootdisk is a containerDisk" },
      { reason: "idle for 2h10m", trigger: "idle" },
      policy(),
      NOW + 600_000,
    );
    await o.sender.idle();
    const bodies = receiver
      .on("/json")
      .map((h) => h.body as { event: string; owner: string; keepUrl: string | null; reason: string });
    expect(bodies.map((b) => b.event)).toEqual(["notice", "refused-stop"]);
    expect(bodies[0]!.owner).toBe("alice");
    expect(bodies[0]!.keepUrl).toMatch(/^https:\/\/ws\.example\.com\/keep\/lab\/gpu-1\?t=k1\./);
    expect(bodies[1]!.reason).toBe("stop refused: disk rootdisk is a containerDisk");
    expect(o.history.transitions(vm).map((t) => t.what)).toEqual([
      "refused-stop",
      "notice",
      "Active → StoppingPending",
    ]);
    expect(o.history.points(vm, 0)).toHaveLength(1);
  });

  it("observe mode warns nobody, unless observe-notices is enabled", async () => {
    receiver = await webhookReceiver();
    const o = outreach();
    o.decided(vm, noticeDecision("observe"), undefined, policy({ mode: "observe" }), NOW);
    await o.sender.idle();
    expect(receiver.received).toEqual([]);
    expect(o.deliversNotice("observe", policy({ mode: "observe" }))).toBe(false);
    expect(o.history.transitions(vm)[0]!.what).toBe("notice (observe mode: nobody warned)");

    o.decided(vm, noticeDecision("observe"), undefined, policy({ mode: "observe", observeNotices: true }), NOW);
    await o.sender.idle();
    expect(receiver.on("/json").map((h) => (h.body as { mode: string }).mode)).toEqual(["observe"]);
    expect(o.deliversNotice("observe", policy({ observeNotices: true }))).toBe(true);
  });
});
