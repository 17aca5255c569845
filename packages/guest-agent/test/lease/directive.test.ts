// What a Directive does to the leases, without the service around it: decisions, then grants,
// a repeated grant once, a grant bounded by the cap, and nothing to save when nothing changed.
import { create } from "@bufbuild/protobuf";
import { DirectiveSchema } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { directiveOnLeases } from "../../src/lease/directive.js";
import { newLease } from "../../src/lease/leases.js";

const now = { wallMs: Date.UTC(2026, 0, 5, 9, 0, 0), monoMs: 1_000_000 };
const alice = { name: "alice", uid: 1000, gid: 1000, home: "/home/alice", shell: "/bin/bash" };
const users = { byName: (name: string) => (name === "alice" ? alice : undefined) };
const held = newLease({ id: "0a1b2c3d", uid: 1000, user: "alice", reason: "training", requestedSeconds: 7200 }, now);

describe("directiveOnLeases", () => {
  it("confirms a lease the collector decided on, then grants a link's lease once, within the cap", () => {
    const directive = create(DirectiveSchema, {
      leaseDecisions: [{ id: "0a1b2c3d", accepted: true, effectiveRemainingSeconds: 7200 }],
      leaseGrants: [
        { id: "1b2c3d4e", seconds: 86_400, user: "alice", reason: "", via: "link" },
        { id: "1b2c3d4e", seconds: 86_400, user: "alice", reason: "", via: "link" },
      ],
    });
    const result = directiveOnLeases([held], directive, now, 14_400, users);
    expect(result.decided.map((event) => event.action)).toEqual(["confirmed"]);
    expect(result.granted).toHaveLength(1);
    expect(result.granted[0]).toMatchObject({ id: "1b2c3d4e", uid: 1000, requestedSeconds: 14_400, via: "link" });
    expect(result.leases.map((lease) => lease.id)).toEqual(["0a1b2c3d", "1b2c3d4e"]);
    expect(result.changed).toBe(true);
  });

  it("changes nothing to save for a decision that only repeats the last one", () => {
    const confirmed = directiveOnLeases(
      [held],
      create(DirectiveSchema, {
        leaseDecisions: [{ id: "0a1b2c3d", accepted: true, effectiveRemainingSeconds: 7200 }],
      }),
      now,
      14_400,
      users,
    );
    const again = directiveOnLeases(
      confirmed.leases,
      create(DirectiveSchema, {
        leaseDecisions: [{ id: "0a1b2c3d", accepted: true, effectiveRemainingSeconds: 7200 }],
      }),
      now,
      14_400,
      users,
    );
    expect(again.changed).toBe(false);
    expect(again.decided).toEqual([]);
  });
});
