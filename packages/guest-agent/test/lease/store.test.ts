// leases.json: parsed strictly from a file the service wrote (captured in
// fixtures/), and moved aside when it is corrupt.
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import {
  corruptFileName,
  loadLeaseState,
  parseLeaseState,
  saveLeaseState,
  serializeLeaseState,
} from "../../src/lease/store.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures");
const fixture = (name: string): Promise<string> => readFile(path.join(fixtures, name), "utf8");
const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

describe("parseLeaseState", () => {
  it("reads a state file the service wrote", async () => {
    const parsed = parseLeaseState(await fixture("leases.json"));
    if (!parsed.ok) throw new Error(parsed.error);
    expect(parsed.state.maxKeepRunningSeconds).toBe(86400);
    expect(parsed.state.leases).toHaveLength(2);
    expect(parsed.state.leases[0]).toMatchObject({
      id: "60bf025d",
      uid: 0,
      user: "root",
      reason: "training resnet50",
      requestedSeconds: 28800,
      confirmed: true,
    });
    expect(parsed.state.leases[1]).toMatchObject({
      clamped: true,
      maxKeepRunningSeconds: 14400,
      collectorMessage: "clamped to max-keep-running 4h",
    });
    // What it reads, it writes back the same.
    expect(parseLeaseState(serializeLeaseState(parsed.state))).toEqual(parsed);
  });

  it("refuses a truncated file, a wrong version, a bad field", async () => {
    expect(parseLeaseState(await fixture("leases-truncated.json"))).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^not JSON/),
    });
    expect(parseLeaseState('{"version":2,"leases":[]}')).toEqual({ ok: false, error: "unknown format version 2" });
    expect(parseLeaseState("[]")).toEqual({ ok: false, error: "not a JSON object" });
    const good = JSON.parse(await fixture("leases.json"));
    good.leases[1].uid = -1;
    expect(parseLeaseState(JSON.stringify(good))).toEqual({ ok: false, error: "lease #2: bad uid" });
    good.leases[1].uid = 0;
    good.leases[0].id = "../../x";
    expect(parseLeaseState(JSON.stringify(good))).toMatchObject({
      ok: false,
      error: expect.stringContaining("lease #1: bad id"),
    });
  });
});

describe("loadLeaseState", () => {
  it("missing file: no leases, nothing logged", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "ws-store-"));
    dirs.push(dir);
    const logs: string[] = [];
    expect(await loadLeaseState(dir, 0, (line) => logs.push(line))).toEqual({ leases: [] });
    expect(logs).toEqual([]);
  });

  it("corrupt file: moved aside under a dated name, logged, no leases", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "ws-store-"));
    dirs.push(dir);
    const truncated = await fixture("leases-truncated.json");
    await writeFile(path.join(dir, "leases.json"), truncated);
    const logs: string[] = [];
    const wallMs = Date.parse("2025-03-01T10:20:30.456Z");
    expect(await loadLeaseState(dir, wallMs, (line) => logs.push(line))).toEqual({ leases: [] });
    expect(corruptFileName(wallMs)).toBe("leases.json.corrupt-2025-03-01T10-20-30-456Z");
    expect(await readdir(dir)).toEqual(["leases.json.corrupt-2025-03-01T10-20-30-456Z"]);
    expect(await readFile(path.join(dir, "leases.json.corrupt-2025-03-01T10-20-30-456Z"), "utf8")).toBe(truncated);
    expect(logs).toHaveLength(1);
    expect(logs[0]).toContain("is corrupt (not JSON");
    expect(logs[0]).toContain("moved it to");
  });

  it("saves atomically: no temp file left, the new content whole", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), "ws-store-"));
    dirs.push(dir);
    const parsed = parseLeaseState(await fixture("leases.json"));
    if (!parsed.ok) throw new Error(parsed.error);
    await saveLeaseState(dir, parsed.state);
    await saveLeaseState(dir, { leases: [] });
    expect(await readdir(dir)).toEqual(["leases.json"]);
    expect(await loadLeaseState(dir, 0, () => undefined)).toEqual({ leases: [] });
  });
});
