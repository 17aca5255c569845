// The single-executable build of the agent (scripts/build-sea.mjs): it runs with no Node.js on
// PATH, and answers to the ws-lease name through a symlink as the .cjs file does.
import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildSea, rootVersion } from "./lib/artifacts.js";
import { run } from "./lib/tools.js";

let work: string;
let binDir: string;
let emptyPath: string;

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), "ws-sea-test-"));
  binDir = path.join(work, "bin");
  mkdirSync(binDir);
  buildSea(path.join(binDir, "ws-agent"));
  symlinkSync("ws-agent", path.join(binDir, "ws-lease"));
  // A PATH with nothing on it: no node, no nvidia-smi, no shell tools.
  emptyPath = path.join(work, "empty");
  mkdirSync(emptyPath);
}, 300_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

const noNode = () => ({ PATH: emptyPath, HOME: work, LANG: "C.UTF-8" });

describe("the single executable", () => {
  it("is one self-contained binary with Node.js inside", () => {
    expect(statSync(path.join(binDir, "ws-agent")).mode & 0o111).toBe(0o111);
    expect(() => run("node", ["--version"], { env: noNode() })).toThrow(/ENOENT/);
  });

  it("runs `probe --json` with no Node.js on PATH", () => {
    const result = run(
      path.join(binDir, "ws-agent"),
      ["probe", "--json", "--window", "200ms", "--config", "/dev/null"],
      { env: noNode(), timeout: 60_000 },
    );
    expect(result.status, result.output).toBe(0);
    const report = JSON.parse(result.stdout) as { sources: Array<{ source: string; state: string }> };
    const names = report.sources.map((s) => s.source);
    for (const source of ["jupyter", "sessions", "gpu", "system", "leases", "disk"])
      expect(names, result.stdout).toContain(source);
    // No nvidia-smi on this PATH: the GPU is absent, which is not a failure.
    expect(report.sources.find((s) => s.source === "gpu")?.state).toBe("SOURCE_STATE_ABSENT");
    expect(report.sources.filter((s) => s.state === "SOURCE_STATE_FAILED")).toEqual([]);
  });

  it("prints its version, and is ws-lease when started under that name", () => {
    const version = run(path.join(binDir, "ws-agent"), ["version"], { env: noNode() });
    expect(version.stdout.trim(), version.output).toBe(`ws-agent ${rootVersion}`);
    const lease = run(path.join(binDir, "ws-lease"), ["--help"], { env: noNode() });
    expect(lease.status, lease.output).toBe(0);
    expect(lease.stdout).toMatch(/^ws-lease - keep this VM running/);
    expect(lease.stderr).not.toMatch(/ExperimentalWarning|single executable/i);
  });
});
