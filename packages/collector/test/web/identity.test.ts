// The auth proxy's identity: one configured header, believed only from trusted proxies when any
// are configured; admins see every VM, everyone else only their own.
import { describe, expect, it } from "vitest";
import { mayView, parseIdentityConfig, viewerFromHeaders, type IdentityConfig } from "../../src/web/identity.js";

const config: IdentityConfig = {
  userHeader: "X-Auth-Request-User",
  groupsHeader: "X-Auth-Request-Groups",
  adminGroups: ["ws-admins"],
  trustedProxies: [],
};

describe("viewerFromHeaders", () => {
  it("reads the user and groups the proxy set; admin by group", () => {
    expect(
      viewerFromHeaders({ "x-auth-request-user": "alice", "x-auth-request-groups": "lab, ws-admins" }, config),
    ).toEqual({
      user: "alice",
      groups: ["lab", "ws-admins"],
      admin: true,
    });
    expect(viewerFromHeaders({ "x-auth-request-user": "bob" }, config)).toEqual({
      user: "bob",
      groups: [],
      admin: false,
    });
  });

  it("believes no one without the header, with a malformed one, or without a configuration", () => {
    expect(viewerFromHeaders({}, config)).toBeUndefined();
    for (const bad of [
      "",
      "  ",
      "a b",
      "x".repeat(200),
      "<script>",
      "al\u0000ice",
      "a,b",
      "al\u009bice",
      "al\u202eice",
      "al\u200bice",
    ])
      expect(viewerFromHeaders({ "x-auth-request-user": bad }, config), JSON.stringify(bad)).toBeUndefined();
    expect(viewerFromHeaders({ "x-auth-request-user": "alice" }, undefined)).toBeUndefined();
  });

  it("with trusted proxies, believes the header only from them (IPv4, IPv6, v4-mapped)", () => {
    const behind = { ...config, trustedProxies: ["10.0.0.0/8", "fd00::/8", "192.0.2.7"] };
    const headers = { "x-auth-request-user": "alice" };
    expect(viewerFromHeaders(headers, behind, "10.1.2.3")?.user).toBe("alice");
    expect(viewerFromHeaders(headers, behind, "::ffff:10.1.2.3")?.user).toBe("alice");
    expect(viewerFromHeaders(headers, behind, "fd12::1")?.user).toBe("alice");
    expect(viewerFromHeaders(headers, behind, "192.0.2.7")?.user).toBe("alice");
    for (const peer of ["192.0.2.8", "11.0.0.1", "2001:db8::1", undefined, "not-an-ip"])
      expect(viewerFromHeaders(headers, behind, peer), String(peer)).toBeUndefined();
  });
});

describe("mayView", () => {
  it("lets the owner and admins see a VM, and no one else (an ownerless VM: admins only)", () => {
    const alice = { user: "alice", groups: [], admin: false };
    expect(mayView(alice, "alice")).toBe(true);
    expect(mayView(alice, "bob")).toBe(false);
    expect(mayView(alice, undefined)).toBe(false);
    expect(mayView(alice, "")).toBe(false);
    expect(mayView({ ...alice, admin: true }, "bob")).toBe(true);
  });
});

describe("parseIdentityConfig", () => {
  it("parses the documented section and reports each mistake", () => {
    const problems: string[] = [];
    expect(
      parseIdentityConfig(
        {
          userHeader: "X-Forwarded-User",
          groupsHeader: "X-Forwarded-Groups",
          adminGroups: ["ops"],
          trustedProxies: ["10.0.0.0/8"],
        },
        problems,
        "http.identity",
      ),
    ).toEqual({
      userHeader: "X-Forwarded-User",
      groupsHeader: "X-Forwarded-Groups",
      adminGroups: ["ops"],
      trustedProxies: ["10.0.0.0/8"],
    });
    expect(problems).toEqual([]);
    parseIdentityConfig(
      { userHeader: "bad header", adminGroups: "ops", trustedProxies: ["10.0.0.0/33"], colour: 1 },
      problems,
      "http.identity",
    );
    expect(problems).toEqual([
      'http.identity: unknown key "colour" (known: userHeader, groupsHeader, adminGroups, trustedProxies)',
      'http.identity.userHeader: "bad header" is not an HTTP header name',
      'http.identity.trustedProxies: "10.0.0.0/33" is not an IP address or CIDR such as 10.0.0.0/8',
      "http.identity.adminGroups: expected a list of strings",
    ]);
    const missing: string[] = [];
    parseIdentityConfig({}, missing, "http.identity");
    expect(missing[0]).toMatch(/userHeader: required/);
  });
});
