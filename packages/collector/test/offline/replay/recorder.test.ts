import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TraceRecorder } from "../../../src/loop/recorder.js";
import { replayTrace } from "../../../src/offline/replay/replay.js";
import { parseTrace } from "../../../src/loop/trace.js";

const EXAMPLE = fileURLToPath(new URL("../../../../../docs/examples/idle-then-stop.trace.jsonl", import.meta.url));
const START = Date.UTC(2025, 0, 6, 9, 0, 0);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "ws-trace-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function decisions(text: string): string[] {
  return replayTrace(text).flatMap((entry) =>
    entry.kind === "decision" && entry.from !== entry.to ? [`${entry.t} ${entry.from}→${entry.to}`] : [],
  );
}

describe("TraceRecorder", () => {
  it("records live events in order, one JSON object per line, and the recording replays like the original", async () => {
    const original = parseTrace(await readFile(EXAMPLE, "utf8"));
    const path = join(dir, "live.jsonl");
    const recorder = new TraceRecorder(path);
    for (const event of original) {
      const atMs = START + event.t * 1000;
      if (event.kind === "report") recorder.record({ atMs, vm: event.vm, report: event.report });
      else if (event.kind === "policy") recorder.record({ atMs, vm: event.vm, policy: event.annotations });
      else if (event.kind === "host") recorder.record({ atMs, vm: event.vm, host: event.host });
      else recorder.record({ atMs, vm: event.vm, event: event.kind });
    }
    await recorder.close();
    const text = await readFile(path, "utf8");
    const lines = text.trimEnd().split("\n");
    expect(lines).toHaveLength(original.length);
    expect(JSON.parse(lines[0]!)).toEqual({
      t: 0,
      at: "2025-01-06T09:00:00.000Z",
      vm: "demo/alice",
      policy: expect.any(Object),
    });
    expect(decisions(text)).toEqual(decisions(await readFile(EXAMPLE, "utf8")));
    expect(recorder.dropped).toBe(0);
  });

  it("appending after a restart continues the time axis of the file", async () => {
    const path = join(dir, "restart.jsonl");
    const first = new TraceRecorder(path);
    first.record({ atMs: START, vm: "a/b", event: "agent-connected" });
    first.record({ atMs: START + 30_000, vm: "a/b", event: "agent-disconnected" });
    await first.close();
    const second = new TraceRecorder(path);
    second.record({ atMs: START + 600_000, vm: "a/b", event: "agent-connected" });
    await second.close();
    const events = parseTrace(await readFile(path, "utf8"));
    expect(events.map((event) => [event.t, event.kind])).toEqual([
      [0, "agent-connected"],
      [30, "agent-disconnected"],
      [600, "agent-connected"],
    ]);
  });

  it("appending to a file without wall times continues right after its last line", async () => {
    const path = join(dir, "handmade.jsonl");
    await writeFile(path, '{"t": 100, "vm": "a/b", "event": "agent-connected"}\n');
    const recorder = new TraceRecorder(path);
    recorder.record({ atMs: START, vm: "a/b", event: "agent-disconnected" });
    await recorder.close();
    expect(parseTrace(await readFile(path, "utf8")).map((event) => event.t)).toEqual([100, 100]);
  });

  it("a write error is reported, counted and never thrown", async () => {
    const errors: Error[] = [];
    const recorder = new TraceRecorder(join(dir, "missing-dir", "trace.jsonl"), {
      onError: (error) => errors.push(error),
    });
    expect(() => recorder.record({ atMs: START, vm: "a/b", event: "agent-connected" })).not.toThrow();
    await recorder.close();
    expect(errors.map((error) => (error as NodeJS.ErrnoException).code)).toEqual(["ENOENT"]);
    expect(recorder.dropped).toBe(1);
  });
});
