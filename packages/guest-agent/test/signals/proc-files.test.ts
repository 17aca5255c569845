import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProcessStatFiles } from "../../src/signals/proc-files.js";
import { parsePidStat } from "../../src/signals/proc-pid.js";

describe("ProcessStatFiles on the real /proc", () => {
  it("keeps a process's stat open, reads it again, and lets go once the process has exited", async () => {
    const child = spawn("sleep", ["30"], { stdio: "ignore" });
    await once(child, "spawn");
    const pid = child.pid!;
    const files = new ProcessStatFiles("/proc");
    const first = files.read(pid);
    expect(parsePidStat(first!).pid).toBe(pid);
    expect(files.size).toBe(1);
    expect(parsePidStat(files.read(pid)!).comm).toBe("sleep");

    child.kill("SIGKILL");
    await once(child, "exit");
    expect(files.read(pid)).toBeUndefined();
    expect(files.size).toBe(0);
  });

  it("closes the files of processes no longer listed, and keeps no more than its limit", () => {
    const files = new ProcessStatFiles("/proc", 1);
    expect(files.read(process.pid)).toBeDefined();
    expect(files.read(1)).toBeDefined();
    expect(files.size).toBe(1);
    files.retainOnly(new Set());
    expect(files.size).toBe(0);
  });
});

describe("ProcessStatFiles on a fixture tree", () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "ws18-procfiles-"));
    await mkdir(path.join(root, "42"));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("reads regular files afresh each time instead of keeping them open", async () => {
    const stat = (ticks: number) => `42 (sh) S 1 42 42 0 -1 4194304 0 0 0 0 ${ticks} 0 0 0 20 0 1 0 100 0 0\n`;
    await writeFile(path.join(root, "42", "stat"), stat(5));
    const files = new ProcessStatFiles(root);
    expect(parsePidStat(files.read(42)!).ownTicks).toBe(5);
    expect(files.size).toBe(0);
    // A snapshot replaced between samples, as tests do: the new content is what counts.
    await rm(path.join(root, "42", "stat"));
    await writeFile(path.join(root, "42", "stat"), stat(9));
    expect(parsePidStat(files.read(42)!).ownTicks).toBe(9);
    expect(files.read(43)).toBeUndefined();
  });
});
