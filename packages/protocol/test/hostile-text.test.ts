// Every way text a VM user (or a cluster, or a document given to whatif) controls reaches a
// terminal, a log line or a file people print, fed the same corpus of hostile strings: terminal
// escapes (CSI, OSC 52 clipboard writes and window titles, DCS, 8-bit C1 forms), bidi overrides
// and isolates, zero-width and separator characters, lone surrogates, invalid UTF-8 and a very
// long line. Whatever the formatter, no ESC, no C1, no bidi or format character, no raw control
// survives, and no line grows without bound. The formatters live in both programs, so this one
// cross-package file sits with the two sanitisers (safe-text.ts) they share.
import { PassThrough } from "node:stream";
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import type { Explanation } from "../../collector/src/engine/types.js";
import { formatTimelineJson, formatTimelineText } from "../../collector/src/offline/replay/format.js";
import type { TimelineEntry } from "../../collector/src/offline/replay/replay.js";
import { progressLines } from "../../collector/src/comeback/ssh-proxy/lines.js";
import { cleanDisputeText } from "../../collector/src/comeback/start/dispute.js";
import type { StartJson } from "../../collector/src/comeback/start/handler.js";
import { formatDisputesJson, formatDisputesText } from "../../collector/src/offline/whatif/disputes-report.js";
import { formatJson, formatText, type WhatifResult } from "../../collector/src/offline/whatif/report.js";
import { BUILTIN_DEFAULT_POLICY } from "../../collector/src/engine/policy.js";
import { formatCancelled, formatLeaseList, formatStatus, formatTaken } from "../../guest-agent/src/lease/format.js";
import type { StatusView, WireLease } from "../../guest-agent/src/lease/wire.js";
import { desktopCommand } from "../../guest-agent/src/notice/desktop.js";
import { noticeFileContent } from "../../guest-agent/src/notice/file.js";
import { cancellationText, noticeText, terminalBytes } from "../../guest-agent/src/notice/format.js";
import { welcomeText } from "../../guest-agent/src/notice/welcome.js";
import { describeSources } from "../../guest-agent/src/probe-format.js";
import {
  ReportSchema,
  SourceState,
  UsageError,
  escapedJson,
  escapedText,
  logfmtLogger,
  reportProgramError,
  terminalText,
} from "../src/index.js";

const ESC = "\u001b";
const BEL = "\u0007";
const ST = `${ESC}\\`;

/** What an attacker writes where a name or a sentence is expected. */
const CORPUS: Record<string, string> = {
  "CSI clear screen": `idle${ESC}[2J${ESC}[H`,
  "CSI colour": `${ESC}[31mred${ESC}[0m`,
  "OSC 52 clipboard write (BEL)": `python3${ESC}]52;c;Y3VybCBldmlsLnNoIHwgc2g=${BEL}`,
  "OSC 52 clipboard write (ST)": `kernel${ESC}]52;c;cm0gLXJmIH4=${ST}`,
  "OSC window title": `${ESC}]0;root@prod: sudo${BEL}title`,
  "OSC 8 hyperlink": `${ESC}]8;;https://evil.example/${ST}click${ESC}]8;;${ST}`,
  "DCS request": `${ESC}P$q"p${ST}`,
  "8-bit CSI": "a\u009b2Jb",
  "8-bit OSC and ST": "a\u009d52;c;eA==\u009cb",
  "C1 NEL and DCS": "line\u0085\u0090x\u009c",
  "C0 soup": "a\u0000b\u0008c\u000bd\u000ce\rf\ng\th\u007fi",
  "CR fakes a line": "ok\r\nlevel=error msg=forged",
  "bidi overrides": "rtl\u202eexe.txt\u202c and \u202a\u202b\u202d",
  "bidi isolates": "\u2066\u2067\u2068evil\u2069",
  "bidi marks": "a\u200eb\u200fc\u061cd",
  "zero width": "r\u200bo\u200co\u200dt\u2060\ufeff",
  "line and paragraph separators": "one\u2028two\u2029three",
  "tag characters": "flag\u{e0041}\u{e007f}",
  "lone surrogates": "x\ud800y\udfffz\udc00",
  "invalid UTF-8": Buffer.from([0x66, 0xff, 0xfe, 0xc0, 0x80, 0xed, 0xa0, 0x80, 0x67]).toString("utf8"),
  "markup for a notification body": `<a href="https://evil.example/">keep it</a><img src="x">&amp;`,
  "very long line": `${"A".repeat(200_000)}${ESC}]52;c;eA==${BEL}`,
};
const HOSTILE = Object.values(CORPUS);
/** Every hostile string at once, as one value. */
const ALL = HOSTILE.join(" ");

/** Controls (but a line end, which the caller allows where the format has lines), format characters, separators, lone surrogates. */
const FORBIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

/** Splits on the line ends a format may have and asserts no line carries anything a terminal or a log reader acts on. */
function expectSafe(output: string, options: { lineEnd?: RegExp; maxLine?: number } = {}): void {
  const lines = output.split(options.lineEnd ?? /\n/);
  for (const line of lines) {
    const hit = FORBIDDEN.exec(line);
    expect(
      hit,
      hit
        ? `U+${hit[0].codePointAt(0)!.toString(16).padStart(4, "0")} survived in ${JSON.stringify(line.slice(0, 200))}`
        : "",
    ).toBeNull();
    expect(line.length).toBeLessThanOrEqual(options.maxLine ?? 5000);
  }
  expect(output).not.toContain(ESC);
}

/** What the agent writes to a tty: a bell first, CR LF line ends, and nothing else that is a control. */
function expectSafeTty(bytes: string): void {
  expect(bytes.startsWith("\r\n\u0007")).toBe(true);
  expectSafe(bytes.slice(3), { lineEnd: /\r\n/ });
}

describe.each(Object.entries(CORPUS))("the hostile string %s", (_name, hostile) => {
  it("terminalText: one line, nothing a terminal acts on, bounded", () => {
    const out = terminalText(hostile);
    expectSafe(out, { maxLine: 300 });
    expect(out).not.toMatch(/\n/);
  });

  it("escapedText: visibly escaped (ESC as \\u001b), bounded; as JSON the same data", () => {
    const out = escapedText(hostile);
    expectSafe(out, { maxLine: 4200 });
    if (hostile.includes(ESC) && hostile.length < 1000) expect(out).toContain("\\u001b");
    expect(JSON.parse(escapedJson({ hostile }))).toEqual({ hostile: JSON.parse(JSON.stringify(hostile)) });
  });

  it("a log line of either program (message, field value and field name)", () => {
    const written: string[] = [];
    const log = logfmtLogger(
      (line) => written.push(line),
      () => 0,
    );
    log("warn", `process ${hostile} is busy`, { command: hostile, [hostile.slice(0, 40)]: 1, nested: { hostile } });
    expect(written).toHaveLength(1);
    expect(written[0]!.endsWith("\n")).toBe(true);
    expectSafe(written[0]!.slice(0, -1), { maxLine: 20_000 });
    expect(written[0]!.slice(0, -1)).not.toMatch(/\n/);
  });

  it("whatif: the table and the JSON", () => {
    const result = whatifResult(hostile);
    expectSafe(formatText(result));
    const json = formatJson(result);
    expectSafe(json, { maxLine: Number.POSITIVE_INFINITY });
    expect(JSON.parse(json).vms[0].name).toBe(JSON.parse(JSON.stringify(hostile)));
  });

  it("whatif --disputes: kernel and process names, the user's words, the knob", () => {
    expectSafe(formatDisputesText([dispute(hostile)]));
    expectSafe(formatDisputesJson([dispute(hostile)]), { maxLine: Number.POSITIVE_INFINITY });
    expect(JSON.parse(formatDisputesJson([dispute(hostile)])).disputes[0].by).toBe(JSON.parse(JSON.stringify(hostile)));
    expectSafe(cleanDisputeText(hostile), { maxLine: 500 });
  });

  it("replay: the timeline and its JSON lines", () => {
    expectSafe(formatTimelineText(timeline(hostile)));
    expectSafe(formatTimelineJson(timeline(hostile)), { maxLine: Number.POSITIVE_INFINITY });
  });

  it("ws-agent probe: a process name, a user, a mount point, a failure message", () => {
    expectSafe(describeSources(report(hostile)));
  });

  it("ws-lease list, status, take and cancel: other users' names and reasons", () => {
    const moment = { nowMs: NOW, timeZone: "UTC" };
    expectSafe(formatLeaseList([lease(hostile)], moment));
    expectSafe(formatTaken({ ...lease(hostile), refused: true, message: hostile }, true, moment));
    expectSafe(formatCancelled([lease(hostile)]));
    expectSafe(formatStatus(status(hostile), moment));
  });

  it("the notices written to ttys, notice.json and the welcome back", () => {
    const facts = {
      stopInSeconds: 600,
      reason: hostile,
      keepRunningHint: hostile,
      idleSeconds: 60,
      observeMode: false,
    };
    const text = noticeText(facts, NOW, "UTC");
    expectSafeTty(terminalBytes(text));
    expectSafeTty(terminalBytes({ title: hostile, lines: [hostile] }));
    expectSafeTty(terminalBytes(cancellationText(hostile)));
    const file = noticeFileContent(
      { id: hostile, stopInSeconds: 600, reason: hostile, keepRunningHint: hostile, idleSeconds: 60, mode: "enforce" },
      text,
      NOW,
    );
    expectSafe(escapedJson(file, 2), { maxLine: Number.POSITIVE_INFINITY });
    expect(JSON.parse(escapedJson(file, 2))).toEqual(file);
    for (const value of Object.values(file)) if (typeof value === "string") expectSafe(value);
    const welcome = welcomeText(
      { stoppedAtMs: NOW, reason: hostile, lastActivity: hostile, keepHint: hostile, disputeUrl: hostile },
      "UTC",
    );
    expectSafeTty(terminalBytes(welcome));
  });

  it("a command line's error (a document or an answer quoted in it), either program", () => {
    for (const error of [new UsageError(`bad ${hostile}`), new Error(`not JSON: got kind ${hostile}`)]) {
      let written = "";
      const stderr = new PassThrough().on("data", (chunk: Buffer) => {
        written += chunk.toString("utf8");
      });
      reportProgramError({ name: "ws-collector" }, error, { stdout: new PassThrough(), stderr, env: {} });
      expect(written).toMatch(/^ws-collector: /);
      expectSafe(written, { maxLine: 21_000 });
    }
  });

  it("a desktop notification: the body is markup to the notification server, so no tag survives", () => {
    const text = noticeText(
      { stopInSeconds: 600, reason: hostile, keepRunningHint: hostile, idleSeconds: 60, observeMode: false },
      NOW,
      "UTC",
    );
    const command = desktopCommand(
      { runuser: "/usr/sbin/runuser", notifySend: "/usr/bin/notify-send" },
      { uid: 1001, user: "alice", busPath: "/run/user/1001/bus" },
      text.title,
      text.lines.join("\n"),
      "critical",
    );
    const body = command.args.at(-1)!;
    expectSafe(body);
    expect(body).not.toMatch(/[<>]/);
  });

  it("the ssh helper's progress lines", () => {
    const start = {
      stages: [{ name: "scheduled", label: hostile, state: "done", detail: hostile }],
      unschedulable: { message: hostile },
      failure: hostile,
    } as unknown as StartJson;
    for (const line of progressLines(undefined, start)) expectSafe(line);
  });
});

it("all of them in one value still come out safe", () => {
  expectSafe(terminalText(ALL, 100_000), { maxLine: 100_000 });
  expectSafe(escapedText(ALL, { maxLength: 1_000_000 }), { maxLine: 2_000_000 });
  expectSafe(formatDisputesText([dispute(ALL)]), { maxLine: 10_000 });
  expectSafe(describeSources(report(ALL)));
});

it("what is safe is left as it was: words, accents, CJK, emoji, a path", () => {
  const fine = "café 東京 🚀 /home/alice/train.py --lr=3e-4 «quoted»";
  expect(terminalText(fine)).toBe(fine);
  expect(escapedText(fine)).toBe(fine);
  expect(terminalText("x".repeat(400))).toHaveLength(300);
  expect(terminalText(`${"x".repeat(298)}🚀`)).toBe(`${"x".repeat(298)}🚀`);
  // A cut never leaves half of a surrogate pair.
  expect(terminalText(`${"x".repeat(298)}🚀y`)).toBe(`${"x".repeat(298)}…`);
  expect(escapedText("a\u001bb\u202ec\u009bd")).toBe("a\\u001bb\\u202ec\\u009bd");
  expect(escapedText("y".repeat(5000), { maxLength: 10 })).toBe("yyyyyyyyyy…(4990 more chars)");
  const written: string[] = [];
  logfmtLogger(
    (line) => written.push(line),
    () => 0,
  )("info", "plain", { user: "alice", count: 3 });
  expect(written[0]).toBe("time=1970-01-01T00:00:00.000Z level=info msg=plain user=alice count=3\n");
});

// --- the inputs each formatter takes, carrying the hostile string wherever a user's text goes ---

const NOW = Date.UTC(2026, 11, 1, 12, 0, 0);

function whatifResult(hostile: string): WhatifResult {
  return {
    fromMs: NOW - 3_600_000,
    toMs: NOW,
    stepSeconds: 60,
    falseStopWindowSeconds: 1800,
    policy: BUILTIN_DEFAULT_POLICY,
    overrides: { "idle-timeout": hostile },
    vms: [
      {
        namespace: hostile,
        name: hostile,
        stops: [
          {
            atMs: NOW - 1_800_000,
            trigger: "idle",
            reason: hostile,
            notCounted: [hostile],
            untilMs: NOW - 600_000,
            endedBy: "activity",
            resumedBy: hostile,
            gpus: 1,
            savedSeconds: 1200,
            likelyFalse: true,
            noticeSeconds: 30,
          },
        ],
        vmHoursSaved: 0.3,
        gpuHoursSaved: 0.3,
        likelyFalseStops: 1,
        reportedSteps: 0,
      },
    ],
  } as WhatifResult;
}

function dispute(hostile: string) {
  return {
    vm: `users/${hostile}`,
    stoppedAt: new Date(NOW).toISOString(),
    reason: hostile,
    idleSeconds: 3600,
    lastActivity: { at: hostile, what: `kernel ${hostile} busy, process ${hostile}` },
    at: new Date(NOW).toISOString(),
    by: hostile,
    what: hostile,
    knob: { name: "signals", text: hostile },
    replay: "kept" as const,
  };
}

function timeline(hostile: string): TimelineEntry[] {
  const explanation = {
    atMs: NOW,
    from: "Active",
    to: "StoppingPending",
    idleSeconds: 3600,
    idleTimeoutSeconds: 3600,
    lastActivityAtMs: NOW,
    lastActivity: hostile,
    readings: [{ signal: "jupyter-connected", detail: hostile, counted: false }],
    vetoes: [{ detail: hostile }],
    blind: [],
    stopAtMs: NOW,
    reason: hostile,
  } as unknown as Explanation;
  return [
    { kind: "input", t: 0, atMs: NOW, vm: hostile, input: hostile },
    {
      kind: "decision",
      t: 60,
      atMs: NOW + 60_000,
      vm: hostile,
      from: "Active",
      to: "StoppingPending",
      summary: hostile,
      reason: hostile,
      actions: [
        { kind: "notice", id: hostile, deadlineMs: NOW, reason: hostile } as never,
        { kind: "event", type: "Normal", reason: hostile } as never,
      ],
      explanation,
    },
  ];
}

function report(hostile: string) {
  return create(ReportSchema, {
    sources: [
      { source: "system", state: SourceState.OK },
      { source: "code_server", state: SourceState.OK },
      { source: "disk", state: SourceState.OK },
      { source: "jupyter", state: SourceState.FAILED, message: `cannot read ${hostile}` },
      { source: hostile, state: SourceState.ABSENT, message: hostile },
    ],
    system: {
      cpuCount: 4,
      load1: 1,
      topProcesses: [{ pid: 1, uid: 1000, user: hostile, command: hostile, cpuCores: 1 }],
    },
    codeServer: { instances: [{ user: hostile }] },
    disk: { mounts: [{ mountPoint: hostile, usedBytes: 1n, sizeBytes: 2n }] },
  });
}

function lease(hostile: string): WireLease {
  return {
    id: "0a1b2c3d",
    uid: 1001,
    user: hostile,
    reason: hostile,
    requestedSeconds: 3600,
    holdSeconds: 3600,
    ageSeconds: 60,
    remainingSeconds: 3540,
    takenAt: new Date(NOW).toISOString(),
    expiresAt: new Date(NOW + 3_540_000).toISOString(),
    confirmed: false,
    clamped: false,
    refused: false,
  };
}

function status(hostile: string): StatusView {
  return {
    now: new Date(NOW).toISOString(),
    collector: { connected: true, address: hostile },
    vm: {
      state: hostile,
      mode: "enforce",
      ageSeconds: 5,
      activeSignals: [hostile],
      idleSeconds: 0,
      explanation: hostile,
    } as unknown as StatusView["vm"],
    policy: { autostopEnabled: true, idleTimeoutSeconds: 3600, gracePeriodSeconds: 600, profile: hostile } as never,
    capSeconds: 86_400,
    capSource: "default",
    leases: [lease(hostile)],
    notice: {
      id: hostile,
      stopInSeconds: 600,
      stopAt: new Date(NOW + 600_000).toISOString(),
      reason: hostile,
      keepRunningHint: hostile,
      idleSeconds: 60,
      mode: "enforce",
    },
  };
}
