// `ws-lease schedule` (issue 36) against a real LeaseService on its socket: the CLI checks the line
// with the collector's own parser (a typo never leaves the VM), the agent carries the request in
// its next Report and answers with the collector's Directive. The collector here is the test: it
// answers each request as the real one words it.
import { create } from "@bufbuild/protobuf";
import { DirectiveSchema, describeSchedule, formatSchedule, parseSchedule, ScheduleAnswerSchema } from "@ws/protocol";
import { afterEach, describe, expect, it } from "vitest";
import { leaseCommand } from "../../src/lease/cli.js";
import type { Harness } from "./support/harness.js";
import { startHarness } from "./support/harness.js";

const harnesses: Harness[] = [];
afterEach(async () => {
  for (const harness of harnesses.splice(0)) await harness.remove();
});

interface Seen {
  op: string;
  line: string;
  timeZone: string;
  date: string;
  user: string;
}

/** A LeaseService whose "collector" answers schedule requests from the Report it would send. */
async function withCollector(answer: (request: Seen) => { ok: boolean; message: string; status?: unknown }) {
  const seen: Seen[] = [];
  let wakes = 0;
  const box: { h?: Harness } = {};
  const h = await startHarness({
    onLeasesChanged: () => {
      wakes++;
      // The Report goes out; the Directive comes back on the next turn of the event loop.
      setImmediate(() => {
        for (const request of box.h!.service.schedules.inReport()) {
          seen.push(request);
          const reply = answer(request);
          box.h!.service.applyDirective(
            create(DirectiveSchema, {
              scheduleAnswers: [
                create(ScheduleAnswerSchema, {
                  id: request.id,
                  ok: reply.ok,
                  message: reply.message,
                  statusJson: reply.status === undefined ? "" : JSON.stringify(reply.status),
                }),
              ],
            }),
          );
        }
      });
    },
  });
  box.h = h;
  harnesses.push(h);
  h.service.setCollectorConnected(true, "collector:9090");
  return { h, seen, wakes: () => wakes };
}

async function cli(h: Harness, argv: string[]) {
  let stdout = "";
  let stderr = "";
  const code = await leaseCommand(argv, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env: { WS_AGENT_SOCKET: h.socketPath },
  });
  return { code, stdout, stderr };
}

/** What the collector answers for a set: the canonical line and the status /api/vms shows. */
function setAnswer(request: Seen) {
  const parsed = parseSchedule(request.timeZone ? `${request.line} tz ${request.timeZone}` : request.line, "UTC");
  if (!parsed.ok) return { ok: false, message: parsed.error };
  return {
    ok: true,
    message: `schedule set: ${formatSchedule(parsed.schedule)}`,
    status: {
      line: formatSchedule(parsed.schedule),
      valid: true,
      description: describeSchedule(parsed.schedule),
      nextStart: "Mon 7 Dec 08:45 CET",
    },
  };
}

describe("ws-lease schedule", () => {
  it("sets a schedule through the agent: the collector sees the line, the zone and who asked", async () => {
    const { h, seen } = await withCollector(setAnswer);
    const result = await cli(h, ["schedule", "weekdays", "08:45", "--tz", "Europe/Berlin", "--stop-by", "20:00"]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(seen).toMatchObject([
      { op: "set", line: "weekdays 08:45 stop-by 20:00", timeZone: "Europe/Berlin", date: "", user: "root" },
    ]);
    expect(result.stdout).toBe(
      [
        "schedule set: weekdays 08:45 stop-by 20:00 tz Europe/Berlin.",
        "Schedule: weekdays at 08:45, stop by 20:00 (Europe/Berlin).",
        "Next start: Mon 7 Dec 08:45 CET.",
        "",
      ].join("\n"),
    );
    // Answered requests are not sent again.
    expect(h.service.schedules.inReport()).toEqual([]);
  });

  it("status, skip and clear, with --json", async () => {
    const { h, seen } = await withCollector((request) =>
      request.op === "status"
        ? {
            ok: true,
            message: "",
            status: { line: "daily 07:00 tz UTC", valid: true, description: "daily at 07:00 (UTC)" },
          }
        : request.op === "skip"
          ? { ok: true, message: `no scheduled start on 2026-12-25` }
          : { ok: true, message: "schedule cleared" },
    );
    const status = await cli(h, ["schedule", "status", "--json"]);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toEqual({
      message: "",
      schedule: { line: "daily 07:00 tz UTC", valid: true, description: "daily at 07:00 (UTC)" },
    });
    const skip = await cli(h, ["schedule", "skip", "2026-12-25"]);
    expect([skip.code, skip.stdout]).toEqual([
      0,
      "no scheduled start on 2026-12-25.\nNo start schedule: the VM starts when someone starts it.\n",
    ]);
    const clear = await cli(h, ["schedule", "clear"]);
    expect(clear.code).toBe(0);
    expect(seen.map((request) => [request.op, request.date])).toEqual([
      ["status", ""],
      ["skip", "2026-12-25"],
      ["clear", ""],
    ]);
  });

  it("a typo never leaves the VM: exit 2 with a did-you-mean, no request, no Report", async () => {
    const { h, seen, wakes } = await withCollector(setAnswer);
    const cases: Array<[string[], string]> = [
      [["schedule", "weekdyas", "08:45"], '"weekdyas" is not a day; did you mean weekdays?'],
      [["schedule", "weekdays", "8.45"], '"8.45" is not a time: write HH:MM'],
      [
        ["schedule", "weekdays", "08:45", "--tz", "Europe/Berln"],
        '"Europe/Berln" is not a time zone; did you mean Europe/Berlin?',
      ],
      [["schedule", "weekdays", "08:45", "--stop-by", "8pm"], '"stop by" needs a time HH:MM, not "8pm"'],
      [["schedule", "skip", "tomorow"], "did you mean tomorrow?"],
      [["schedule", "status", "now"], 'schedule status takes no arguments, got "now"'],
      [["schedule", "--tzz", "UTC"], "--tzz"],
    ];
    for (const [argv, message] of cases) {
      const result = await cli(h, argv);
      expect(result.code, argv.join(" ")).toBe(2);
      expect(result.stderr, argv.join(" ")).toContain(message);
    }
    expect([seen, wakes()]).toEqual([[], 0]);
  });

  it("the collector's refusal is printed, exit 1; without a collector nothing is changed", async () => {
    const { h } = await withCollector(() => ({ ok: false, message: "this VM has no schedule to skip a day of" }));
    const refused = await cli(h, ["schedule", "skip", "tomorrow"]);
    expect([refused.code, refused.stderr]).toEqual([1, "ws-lease: this VM has no schedule to skip a day of\n"]);
    h.service.setCollectorConnected(false, "");
    const offline = await cli(h, ["schedule", "daily", "07:00"]);
    expect(offline.code).toBe(1);
    expect(offline.stderr).toContain("the collector is not connected");
  });

  it("has its own help", async () => {
    const { h } = await withCollector(setAnswer);
    for (const argv of [
      ["schedule", "--help"],
      ["help", "schedule"],
    ]) {
      const result = await cli(h, argv);
      expect(result.code).toBe(0);
      expect(result.stdout).toContain("Usage: ws-lease schedule DAYS HH:MM [--tz ZONE] [--stop-by HH:MM] [--json]");
    }
  });
});
