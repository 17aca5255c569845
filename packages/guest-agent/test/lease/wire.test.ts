import { describe, expect, it } from "vitest";
import { parseChallenge, parseRequest, takeLines } from "../../src/lease/wire.js";

describe("parseRequest", () => {
  it("reads the four requests", () => {
    expect(parseRequest('{"op":"take","seconds":28800,"reason":"training"}')).toEqual({
      ok: true,
      request: { op: "take", seconds: 28800, reason: "training", waitSeconds: 0 },
    });
    expect(parseRequest('{"op":"take","seconds":60,"wait":99}')).toEqual({
      ok: true,
      request: { op: "take", seconds: 60, reason: "", waitSeconds: 10 },
    });
    expect(parseRequest('{"op":"list"}')).toEqual({ ok: true, request: { op: "list" } });
    expect(parseRequest('{"op":"status"}')).toEqual({ ok: true, request: { op: "status" } });
    expect(parseRequest('{"op":"cancel","id":"0a1b2c3d"}')).toEqual({
      ok: true,
      request: { op: "cancel", target: { id: "0a1b2c3d" } },
    });
    expect(parseRequest('{"op":"cancel","all":true}')).toEqual({
      ok: true,
      request: { op: "cancel", target: { all: true } },
    });
  });

  it("ignores a claimed identity: nothing from the request decides who the caller is", () => {
    const parsed = parseRequest('{"op":"take","seconds":60,"uid":0,"user":"root","owner":"root"}');
    expect(parsed).toEqual({ ok: true, request: { op: "take", seconds: 60, reason: "", waitSeconds: 0 } });
  });

  it("answers anything else with an error", () => {
    for (const [line, code] of [
      ["", "bad_request"],
      ["{", "bad_request"],
      ["null", "bad_request"],
      ['"take"', "bad_request"],
      ['{"op":"take"}', "bad_duration"],
      ['{"op":"take","seconds":"8h"}', "bad_duration"],
      ['{"op":"take","seconds":1e400}', "bad_duration"],
      ['{"op":"take","seconds":60,"reason":5}', "bad_reason"],
      ['{"op":"take","seconds":60,"wait":-1}', "bad_request"],
      ['{"op":"cancel","id":"x","all":true}', "bad_request"],
      ['{"op":"cancel","all":"yes"}', "bad_request"],
      ['{"op":"__proto__"}', "bad_request"],
    ] as const) {
      const parsed = parseRequest(line);
      expect(parsed.ok, line).toBe(false);
      if (!parsed.ok) expect(parsed.error.code, line).toBe(code);
    }
  });

  it("frames lines and reads the challenge", () => {
    expect(takeLines('{"a":1}\r\n\n{"b"')).toEqual({ lines: ['{"a":1}'], rest: '{"b"' });
    expect(parseChallenge('{"protocol":"ws-agent-lease","version":1,"nonce":"ab","proof":"cd"}')).toEqual({
      protocol: "ws-agent-lease",
      version: 1,
      nonce: "ab",
      proof: "cd",
    });
    expect(parseChallenge('{"protocol":"other","version":1,"nonce":"ab","proof":"cd"}')).toBeUndefined();
    expect(parseChallenge("HTTP/1.1 400")).toBeUndefined();
  });
});
