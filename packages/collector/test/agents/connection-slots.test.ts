// Who gets the agent port's connection slots (agents/connection-slots.ts, pure): a source's share
// of unauthenticated connections, eviction of the oldest unauthenticated one at the cap (never an
// authenticated one), authenticated connections counted against no source, one connection per VM.
import { describe, expect, it } from "vitest";
import { ConnectionSlots, connectionSource } from "../../src/agents/connection-slots.js";

const slotsWith = (cap: number | undefined, maxPendingPerSource: number) =>
  new ConnectionSlots<string>({ cap, maxPendingPerSource });

describe("connection slots", () => {
  it("refuse a source past its share of unauthenticated connections, and no other source", () => {
    const slots = slotsWith(undefined, 2);
    slots.add("10.0.0.9:1", "10.0.0.9", "a");
    slots.add("10.0.0.9:2", "10.0.0.9", "b");
    expect(slots.admit("10.0.0.9")).toEqual({ kind: "refuse", reason: "per-source" });
    expect(slots.admit("10.0.0.5")).toEqual({ kind: "accept" });
    // One of them closes: the source has room again.
    slots.remove("10.0.0.9:1");
    expect(slots.admit("10.0.0.9")).toEqual({ kind: "accept" });
  });

  it("count authenticated connections against no source: many agents behind one NAT all get in", () => {
    const slots = slotsWith(undefined, 2);
    for (let i = 0; i < 50; i++) {
      expect(slots.admit("192.0.2.1")).toEqual({ kind: "accept" });
      slots.add(`192.0.2.1:${i}`, "192.0.2.1", `agent-${i}`);
      slots.authenticated(`192.0.2.1:${i}`, `lab/vm-${i}`);
    }
    expect(slots.size).toBe(50);
    expect(slots.pendingCount).toBe(0);
  });

  it("at the cap, evict the oldest unauthenticated connection, and never an authenticated one", () => {
    const slots = slotsWith(3, 10);
    slots.add("10.0.0.7:1", "10.0.0.7", "agent");
    slots.add("10.0.0.9:1", "10.0.0.9", "first");
    slots.add("10.0.0.8:1", "10.0.0.8", "second");
    slots.authenticated("10.0.0.7:1", "lab/vm-0");
    expect(slots.admit("10.0.0.1")).toEqual({ kind: "evict", victim: "10.0.0.9:1" });
    slots.remove("10.0.0.9:1");
    slots.add("10.0.0.1:1", "10.0.0.1", "new");
    expect(slots.admit("10.0.0.2")).toEqual({ kind: "evict", victim: "10.0.0.8:1" });
  });

  it("at the cap with every connection authenticated, refuse the new one", () => {
    const slots = slotsWith(2, 10);
    for (const [i, key] of ["10.0.0.1:1", "10.0.0.2:1"].entries()) {
      slots.add(key, key.split(":")[0]!, key);
      slots.authenticated(key, `lab/vm-${i}`);
    }
    expect(slots.admit("10.0.0.3")).toEqual({ kind: "refuse", reason: "cap" });
  });

  it("give a VM one connection: a newer one authenticated as it names the older one to close", () => {
    const slots = slotsWith(undefined, 10);
    slots.add("10.0.0.1:1", "10.0.0.1", "old");
    slots.add("10.0.0.1:2", "10.0.0.1", "new");
    expect(slots.authenticated("10.0.0.1:1", "lab/vm-0")).toBeUndefined();
    // The same connection again (a second stream on it) replaces nothing.
    expect(slots.authenticated("10.0.0.1:1", "lab/vm-0")).toBeUndefined();
    expect(slots.authenticated("10.0.0.1:2", "lab/vm-0")).toBe("old");
    slots.remove("10.0.0.1:1");
    // The older one's close does not forget the newer one.
    slots.add("10.0.0.1:3", "10.0.0.1", "newest");
    expect(slots.authenticated("10.0.0.1:3", "lab/vm-0")).toBe("new");
  });

  it("count an IPv4 peer on a dual-stack listener as its IPv4 address", () => {
    expect(connectionSource("::ffff:10.1.2.3")).toBe("10.1.2.3");
    expect(connectionSource("10.1.2.3")).toBe("10.1.2.3");
    expect(connectionSource("FD00::5")).toBe("fd00::5");
  });
});
