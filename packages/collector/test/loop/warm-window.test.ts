// A learned warm start nobody came for yet (issue 36 item 2): the VM's loop runs under the warm
// window as its idle-timeout, resolved again whenever the VM's metadata changes, and under its
// own idle-timeout once the warm start is settled. VmEntries with the serve wiring's hook.
import { describe, expect, it } from "vitest";
import { parseWarmStarts, warmWaitingPolicy } from "../../src/comeback/warm/starts.js";
import { BUILTIN_DEFAULT_POLICY, DEFAULT_ANNOTATION_PREFIX as P } from "../../src/engine/policy.js";
import { VmEntries } from "../../src/loop/fleet-entries.js";
import type { PolicySource, VmMetadata } from "../../src/model/policy-source.js";

describe("the warm window as idle-timeout", () => {
  it("applies while the warm start waits, and the VM's own idle-timeout is back once it is settled", () => {
    const metadata: VmMetadata = {
      labels: {},
      annotations: { [`${P}idle-timeout`]: "2h", [`${P}warm-start`]: "on", [`${P}warm-start-window`]: "10m" },
    };
    const source: PolicySource = {
      defaults: BUILTIN_DEFAULT_POLICY,
      profiles: {},
      prefix: P,
      metadataFor: () => metadata,
    };
    const entries = new VmEntries(
      source,
      () => {},
      undefined,
      (_vm, policy) => warmWaitingPolicy(policy, parseWarmStarts(metadata.annotations[`${P}warm-starts`])),
    );
    const entry = entries.entryFor({ namespace: "team", name: "ada" });
    expect(entry.loop.policy.idleTimeoutSeconds).toBe(2 * 3600);
    metadata.annotations[`${P}warm-starts`] = "tpk0egw";
    expect(entries.applyPolicy(entry)).toBe(true);
    expect(entry.loop.policy.idleTimeoutSeconds).toBe(10 * 60);
    // The last valid policy stays the VM's own: a later typo falls back to it, not to the window.
    expect(entry.lastValidPolicy?.idleTimeoutSeconds).toBe(2 * 3600);
    metadata.annotations[`${P}warm-starts`] = "tpk0egx";
    expect(entries.applyPolicy(entry)).toBe(true);
    expect(entry.loop.policy.idleTimeoutSeconds).toBe(2 * 3600);
    expect(entry.policyErrors).toEqual([]);
  });
});
