// Leases the collector grants through a keep-running link (Directive.lease_grants):
// recorded once per id, owned by the named local account when there is one,
// shown and reported as "via link", audited; malformed grants change nothing.
import { create } from "@bufbuild/protobuf";
import { DirectiveSchema } from "@ws/protocol";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "./support/harness.js";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.stop();
  await h.remove();
});

const grant = (fields: { id: string; seconds: number; user: string; reason?: string }) =>
  create(DirectiveSchema, {
    leaseGrants: [{ reason: "kept running via link", via: "link", noticeId: "n-1", ...fields }],
  });

describe("lease grants from the collector", () => {
  it("records a grant once, as a lease via link, owned by the local account of that name", async () => {
    h.service.applyDirective(grant({ id: "0a1b2c3d", seconds: 14_400, user: "root" }));
    h.service.applyDirective(grant({ id: "0a1b2c3d", seconds: 14_400, user: "root" })); // a repeated Directive
    const leases = h.service.status().leases;
    expect(leases).toHaveLength(1);
    expect(leases[0]).toMatchObject({
      id: "0a1b2c3d",
      uid: 0,
      user: "root",
      via: "link",
      requestedSeconds: 14_400,
      reason: "kept running via link",
    });
    expect(h.service.reportLeases().leases?.[0]).toMatchObject({ id: "0a1b2c3d", via: "link" });
    await h.restart(); // durable like any lease
    expect(h.service.status().leases[0]).toMatchObject({ id: "0a1b2c3d", via: "link" });
    const audit = await readFile(path.join(h.stateDir, "lease-audit.log"), "utf8");
    expect(audit).toMatch(/action=granted id=0a1b2c3d uid=0 user=root .* via=link detail="via keep-running link"/);
  });

  it("a name with no local account: owned by nobody, named as sent; malformed grants are ignored", () => {
    h.service.applyDirective(grant({ id: "1b2c3d4e", seconds: 3600, user: "ws17-no-such-user" }));
    expect(h.service.status().leases.find((l) => l.id === "1b2c3d4e")).toMatchObject({
      uid: 65534,
      user: "ws17-no-such-user",
      via: "link",
    });
    // A VM without an owner (no owner label): the lease is nobody's, as docs/leases.md says.
    h.service.applyDirective(grant({ id: "4e5f6071", seconds: 3600, user: "" }));
    expect(h.service.status().leases.find((l) => l.id === "4e5f6071")).toMatchObject({
      uid: 65534,
      user: "nobody",
      via: "link",
    });
    const before = h.service.status().leases.length;
    for (const bad of [
      { id: "not-hex!", seconds: 3600, user: "" },
      { id: "2c3d4e5f", seconds: -1, user: "" },
      { id: "3d4e5f60", seconds: Number.NaN, user: "" },
    ])
      h.service.applyDirective(grant(bad));
    expect(h.service.status().leases).toHaveLength(before);
  });
});
