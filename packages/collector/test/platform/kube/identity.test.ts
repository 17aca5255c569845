import { describe, expect, it } from "vitest";
import { checkPeerIdentity, normalizeIp, parsePeerAddress } from "../../../src/platform/kube/identity.js";

const vm = { namespace: "users", name: "alice" };

describe("parsePeerAddress", () => {
  const cases: Array<[string, { ip: string; port: number | null } | null]> = [
    // grpc-js ServerSurfaceCall.getPeer(): `${remoteAddress}:${remotePort}`, no brackets.
    ["10.0.0.5:43120", { ip: "10.0.0.5", port: 43120 }],
    ["::ffff:10.0.0.5:43120", { ip: "10.0.0.5", port: 43120 }],
    ["::1:5000", { ip: "::1", port: 5000 }],
    ["fd00:10:244::5:43120", { ip: "fd00:10:244::5", port: 43120 }],
    // gRPC core style.
    ["ipv4:10.0.0.5:43120", { ip: "10.0.0.5", port: 43120 }],
    ["ipv6:[::1]:5000", { ip: "::1", port: 5000 }],
    ["ipv6:[::ffff:10.1.2.3]:80", { ip: "10.1.2.3", port: 80 }],
    ["[FD00:0:0:0:0:0:0:5]:7", { ip: "fd00::5", port: 7 }],
    // Bare addresses.
    ["10.0.0.5", { ip: "10.0.0.5", port: null }],
    ["fd00::5", { ip: "fd00::5", port: null }],
    // Not an IP.
    ["unix:/run/ws.sock", null],
    ["unknown", null],
    ["", null],
    ["10.0.0.5:99999", null],
  ];
  for (const [peer, expected] of cases) {
    it(JSON.stringify(peer), () => expect(parsePeerAddress(peer)).toEqual(expected));
  }
});

describe("normalizeIp", () => {
  it("canonicalises IPv6 and unmaps IPv4-mapped addresses", () => {
    expect(normalizeIp("::FFFF:192.168.1.10")).toBe("192.168.1.10");
    expect(normalizeIp("::ffff:c0a8:010a")).toBe("192.168.1.10");
    expect(normalizeIp("2001:DB8:0000::0001")).toBe("2001:db8::1");
    expect(normalizeIp("[fe80::1%eth0]")).toBe("fe80::1");
    expect(normalizeIp("not-an-ip")).toBeNull();
  });
});

describe("checkPeerIdentity", () => {
  it("accepts the launcher pod's IP, in any spelling", () => {
    expect(checkPeerIdentity("::ffff:10.244.0.10:51234", vm, ["10.244.0.10"])).toEqual({ ok: true, ip: "10.244.0.10" });
    expect(checkPeerIdentity("ipv6:[fd00::a]:1", vm, ["10.244.0.10", "FD00:0::A"])).toEqual({
      ok: true,
      ip: "fd00::a",
    });
  });

  it("refuses another VM's address, naming both", () => {
    const verdict = checkPeerIdentity("10.244.0.11:40000", vm, ["10.244.0.10"]);
    expect(verdict.ok).toBe(false);
    if (!verdict.ok)
      expect(verdict.reason).toBe(
        "connection from 10.244.0.11 but VM users/alice runs in a virt-launcher pod at 10.244.0.10",
      );
  });

  it("refuses when no launcher pod IP is known", () => {
    const verdict = checkPeerIdentity("10.244.0.10:40000", vm, []);
    expect(verdict).toEqual({
      ok: false,
      reason: "no running virt-launcher pod with an IP is known for VM users/alice",
    });
  });

  it("refuses a peer it cannot read", () => {
    expect(checkPeerIdentity("unknown", vm, ["10.244.0.10"]).ok).toBe(false);
  });
});
