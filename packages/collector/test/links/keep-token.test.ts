// Keep-running link tokens and the per-VM history, pure.
import { describe, expect, it } from "vitest";
import { History } from "../../src/outreach/history.js";
import { keepChoices } from "../../src/comeback/keeplink/handler.js";
import { deriveLinkKey, keepLinkUrl, signKeepLink, UsedLinks, verifyKeepLink } from "../../src/links/keep-token.js";

const key = deriveLinkKey(Buffer.from("a collector token key of enough length, for tests"));
const vm = { namespace: "lab", name: "gpu-1" };
const claims = { ...vm, noticeId: "n-1", expiresAtMs: 10_000 };

describe("keep-running link tokens", () => {
  it("verifies what it signed, until it expires, for its own VM only", () => {
    const token = signKeepLink(key, claims);
    expect(verifyKeepLink(key, token, vm, 9_999)).toEqual({ ok: true, claims });
    expect(verifyKeepLink(key, token, vm, 10_000)).toMatchObject({ ok: false, problem: "expired" });
    expect(verifyKeepLink(key, token, { namespace: "lab", name: "gpu-2" }, 0)).toMatchObject({
      ok: false,
      problem: "other-vm",
    });
  });

  it("refuses tampering: another payload, another signature, another key, garbage", () => {
    const token = signKeepLink(key, claims);
    const [version, payload, mac] = token.split(".");
    const forged = Buffer.from(JSON.stringify({ ns: "lab", n: "gpu-1", id: "n-1", exp: 99_999_999 })).toString(
      "base64url",
    );
    expect(verifyKeepLink(key, `${version}.${forged}.${mac}`, vm, 0)).toMatchObject({ ok: false, problem: "tampered" });
    expect(verifyKeepLink(key, `${version}.${payload}.${mac!.slice(0, -1)}A`, vm, 0).ok).toBe(false);
    expect(
      verifyKeepLink(deriveLinkKey(Buffer.from("another key of enough length for the test run")), token, vm, 0),
    ).toMatchObject({ problem: "tampered" });
    for (const junk of ["", "k1", "k1..", "k2.a.b", "x".repeat(2000), `${version}.${payload}`])
      expect(verifyKeepLink(key, junk, vm, 0).ok, junk.slice(0, 20)).toBe(false);
    // The link key is derived: it is not the token key itself.
    expect(deriveLinkKey(Buffer.from("k")).equals(Buffer.from("k"))).toBe(false);
  });

  it("links carry the VM in the path, and are used once", () => {
    expect(keepLinkUrl("https://ws.example.com", key, claims)).toMatch(
      /^https:\/\/ws\.example\.com\/keep\/lab\/gpu-1\?t=k1\./,
    );
    const used = new UsedLinks(2);
    expect(used.usedAt(claims)).toBeUndefined();
    used.markUsed(claims, 1_000, 14_400);
    expect(used.usedAt(claims)).toEqual({ atMs: 1_000, expiresAtMs: 10_000, seconds: 14_400 });
    used.markUsed({ ...claims, noticeId: "n-2" }, 1_000, 3600);
    used.markUsed({ ...claims, noticeId: "n-3" }, 1_000, 3600);
    expect(used.usedAt(claims)).toBeUndefined(); // bounded: the oldest went (and it expires anyway)
  });

  it("offers the configured choices capped by max-keep-running", () => {
    expect(keepChoices([1, 4, 8], 24 * 3600)).toEqual([3600, 14_400, 28_800]);
    expect(keepChoices([1, 4, 8], 5 * 3600)).toEqual([3600, 14_400, 18_000]);
    expect(keepChoices([1, 4, 8], 1800)).toEqual([1800]);
  });
});

describe("History", () => {
  it("keeps a bounded ring of points, a point for every change, and the last transitions newest first", () => {
    const history = new History({ pointSpacingMs: 1000, pointsPerVm: 3, transitionsPerVm: 2 });
    history.point(vm, { atMs: 0, idleSeconds: 0, activeSignals: 1, state: "Active" });
    history.point(vm, { atMs: 500, idleSeconds: 0.5, activeSignals: 1, state: "Active" }); // within spacing, nothing changed: skipped
    history.point(vm, { atMs: 600, idleSeconds: 0.6, activeSignals: 0, state: "Active" }); // activity changed: kept
    history.point(vm, { atMs: 2000, idleSeconds: 2, activeSignals: 0, state: "Active" });
    history.point(vm, { atMs: 2100, idleSeconds: 2.1, activeSignals: 0, state: "StoppingPending" });
    expect(history.points(vm, 0).map((p) => p.atMs)).toEqual([600, 2000, 2100]);
    expect(history.points(vm, 2000).map((p) => p.state)).toEqual(["Active", "StoppingPending"]);
    for (const what of ["a", "b", "c"]) history.transition(vm, { atMs: 0, what, reason: "r" });
    expect(history.transitions(vm).map((t) => t.what)).toEqual(["c", "b"]);
    history.forget(vm);
    expect(history.points(vm, 0)).toEqual([]);
  });
});
