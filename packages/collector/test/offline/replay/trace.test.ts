import { create } from "@bufbuild/protobuf";
import { ReportSchema, SourceState } from "@ws/protocol";
import { describe, expect, it } from "vitest";
import { formatTraceLine, parseTrace, TraceError } from "../../../src/loop/trace.js";

function problemsOf(text: string): string[] {
  try {
    parseTrace(text);
  } catch (error) {
    if (error instanceof TraceError) return error.problems;
    throw error;
  }
  throw new Error("expected a TraceError");
}

describe("parseTrace", () => {
  it("reads the three kinds of line, skipping blank lines and # comments", () => {
    const events = parseTrace(
      [
        "# a comment",
        '{"t": 0, "vm": "demo/alice", "policy": {"idle-timeout": "5m"}}',
        "",
        '{"t": 0, "vm": "demo/alice", "event": "agent-connected"}',
        '{"t": 15.5, "at": "2025-01-06T09:00:15.500Z", "vm": "demo/alice", "report": {"sequence": "7", "intervalSeconds": 15, "sources": [{"source": "gpu", "state": "SOURCE_STATE_ABSENT"}], "sessions": {"sessions": [{"tty": "pts/0", "inputAgeSeconds": 2}]}}}',
      ].join("\n"),
    );
    expect(events.map((event) => [event.line, event.kind, event.t])).toEqual([
      [2, "policy", 0],
      [4, "agent-connected", 0],
      [5, "report", 15.5],
    ]);
    const report = events[2]!;
    if (report.kind !== "report") throw new Error("not a report");
    expect(report.at).toBe("2025-01-06T09:00:15.500Z");
    expect(report.report.sequence).toBe(7n);
    expect(report.report.sources[0]?.state).toBe(SourceState.ABSENT);
    expect(report.report.sessions?.sessions[0]?.inputAgeSeconds).toBe(2);
  });

  it("orders events by t, keeping file order for equal times", () => {
    const events = parseTrace(
      [
        '{"t": 30, "vm": "a/b", "event": "agent-disconnected"}',
        '{"t": 10, "vm": "a/b", "event": "agent-connected"}',
        '{"t": 10, "vm": "a/c", "event": "agent-connected"}',
      ].join("\n"),
    );
    expect(events.map((event) => `${event.t}:${event.vm}`)).toEqual(["10:a/b", "10:a/c", "30:a/b"]);
  });

  it.each([
    ['{"t": 0, "vm": "a/b", "event": "agent-connected"', /^line 1: not valid JSON/],
    ["[1, 2]", /^line 1: expected a JSON object, got an array/],
    ['{"t": -1, "vm": "a/b", "event": "agent-connected"}', /^line 1: "t" must be a number of seconds from the start/],
    ['{"t": "0", "vm": "a/b", "event": "agent-connected"}', /^line 1: "t" must be a number/],
    ['{"t": 0, "vm": "alice", "event": "agent-connected"}', /^line 1: "vm" must be "namespace\/name", got "alice"/],
    ['{"t": 0, "vm": "a/b", "event": "agent-connected", "colour": 1}', /^line 1: unknown field "colour"/],
    ['{"t": 0, "vm": "a/b"}', /^line 1: a line has exactly one of "report", "event", "policy" or "host"$/],
    ['{"t": 0, "vm": "a/b", "event": "agent-connected", "policy": {}}', /exactly one .* not event and policy/],
    [
      '{"t": 0, "vm": "a/b", "event": "connected"}',
      /^line 1: "event" must be "agent-connected" or "agent-disconnected", got "connected"/,
    ],
    [
      '{"t": 0, "vm": "a/b", "report": {"sessoins": {}}}',
      /^line 1: "report" is not a Report in the protobuf JSON mapping: .*sessoins/,
    ],
    ['{"t": 0, "vm": "a/b", "report": {"intervalSeconds": "fast"}}', /^line 1: "report" is not a Report/],
    [
      '{"t": 0, "vm": "a/b", "policy": {"idle-timeout": 300}}',
      /^line 1: "policy": the value of "idle-timeout" must be a string, as annotations are \(write "300"\)/,
    ],
    ['{"t": 0, "vm": "a/b", "at": "yesterday", "event": "agent-connected"}', /"at" must be an RFC 3339 time/],
    [
      '{"t": 0, "vm": "a/b", "event": "agent-connected", "goodbye": "SIGTERM"}',
      /^line 1: "goodbye" is a string on an "agent-disconnected" line only/,
    ],
  ])("%s → a clear error with the line number", (line, message) => {
    expect(problemsOf(line)[0]).toMatch(message);
  });

  it("names every bad line, with its number in the file", () => {
    const problems = problemsOf(
      ['{"t": 0, "vm": "a/b", "event": "agent-connected"}', "", "oops", '{"t": 1, "vm": "a/b", "event": "nope"}'].join(
        "\n",
      ),
    );
    expect(problems).toEqual([
      expect.stringMatching(/^line 3: not valid JSON/),
      expect.stringMatching(/^line 4: "event" must be/),
    ]);
  });

  it("stops listing after 20 problems", () => {
    expect(problemsOf(Array.from({ length: 50 }, () => "x").join("\n"))).toHaveLength(21);
  });
});

describe("formatTraceLine", () => {
  it("an agent's goodbye survives the round trip; a plain disconnection has none", () => {
    const said = formatTraceLine(3, "a/b", { event: "agent-disconnected", goodbye: "SIGTERM: stopped on purpose" });
    const plain = formatTraceLine(4, "a/b", { event: "agent-disconnected" });
    expect(parseTrace(`${said}\n${plain}`)).toEqual([
      expect.objectContaining({ kind: "agent-disconnected", goodbye: "SIGTERM: stopped on purpose" }),
      expect.not.objectContaining({ goodbye: expect.anything() }),
    ]);
  });

  it("writes lines parseTrace reads back to the same Report", () => {
    const report = create(ReportSchema, {
      sequence: 42n,
      intervalSeconds: 15,
      sampleAgeSeconds: 3,
      sessions: { sessions: [{ tty: "pts/1", user: "bob", inputAgeSeconds: 0 }] },
      gpu: { gpus: [{ index: 0, utilizationRatio: 0.5, memoryTotalBytes: 85_899_345_920n }] },
    });
    const line = formatTraceLine(12.3456, "lab/bob", { report }, Date.UTC(2025, 0, 6, 9, 0, 12, 345));
    expect(JSON.parse(line)).toMatchObject({ t: 12.346, at: "2025-01-06T09:00:12.345Z", vm: "lab/bob" });
    const [event] = parseTrace(line);
    expect(event?.kind).toBe("report");
    if (event?.kind === "report") expect(event.report).toEqual(report);
  });
});
