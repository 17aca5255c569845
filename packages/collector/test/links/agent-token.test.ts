import { describe, expect, it } from "vitest";
import { generateKey, keyFromFile, KeyError, tokenFor, verifyToken } from "../../src/links/agent-token.js";

describe("tokens", () => {
  const key = Buffer.from(generateKey());

  it("verifies the token of the same VM only", () => {
    const token = tokenFor(key, "team-a", "alice");
    expect(verifyToken(key, "team-a", "alice", token)).toBe(true);
    expect(verifyToken(key, "team-a", "bob", token)).toBe(false);
    expect(verifyToken(key, "team-b", "alice", token)).toBe(false);
    expect(verifyToken(key, "team-a", "alice", token.slice(0, -1))).toBe(false);
    expect(verifyToken(Buffer.from(generateKey()), "team-a", "alice", token)).toBe(false);
  });

  it("is not confused by namespace/name boundaries", () => {
    expect(tokenFor(key, "a", "b-c")).not.toBe(tokenFor(key, "a-b", "c"));
  });

  it("refuses short keys with the command that makes a good one", () => {
    expect(() => keyFromFile(Buffer.from("short\n"), "/etc/k")).toThrow(KeyError);
    expect(() => keyFromFile(Buffer.from("short\n"), "/etc/k")).toThrow(/ws-collector keygen > \/etc\/k/);
    expect(keyFromFile(Buffer.from(`${generateKey()}\n`), "/k").length).toBe(64);
  });
});
