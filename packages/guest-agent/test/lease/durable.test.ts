// A lease is confirmed only once it is on disk: the state dir on a real 64 KiB tmpfs, filled up.
import { execFileSync } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { callAgent } from "../../src/lease/client.js";
import type { Answer } from "../../src/lease/wire.js";
import { startHarness, type Harness } from "./support/harness.js";

const mounted: string[] = [];
const harnesses: Harness[] = [];
afterEach(async () => {
  const stopping = harnesses.splice(0);
  for (const harness of stopping) await harness.stop().catch(() => undefined);
  for (const dir of mounted.splice(0)) execFileSync("umount", ["-l", dir]);
  for (const harness of stopping) await harness.remove();
});

/** Writes filler files until the filesystem refuses: the disk is then really full. */
async function fill(dir: string): Promise<void> {
  for (let index = 0; ; index++) {
    try {
      await writeFile(path.join(dir, `filler-${index}`), Buffer.alloc(4096, 1));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOSPC") return;
      throw error;
    }
  }
}

function leaseIds(answer: Answer): string[] {
  if (!answer.ok || answer.op !== "list") throw new Error(`expected a list, got ${JSON.stringify(answer)}`);
  return answer.leases.map((lease) => lease.id).sort();
}

describe("durable leases", () => {
  it("refuses a lease it cannot save with 'the disk is full', and keeps every earlier one across a restart", async () => {
    const h = await startHarness();
    harnesses.push(h);
    // The harness's state dir, moved onto a tmpfs of 64 KiB (16 pages).
    await h.stop();
    await mkdir(h.stateDir, { recursive: true });
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", h.stateDir]);
    mounted.push(h.stateDir);
    await h.restart();

    const first = await callAgent(h.socketPath, { op: "take", seconds: 3600, reason: "one" });
    const second = await callAgent(h.socketPath, { op: "take", seconds: 7200, reason: "two" });
    expect(first.ok && second.ok).toBe(true);
    const before = leaseIds(await callAgent(h.socketPath, { op: "list" }));
    const leasesFile = await readFile(path.join(h.stateDir, "leases.json"), "utf8");

    await fill(h.stateDir);
    for (let attempt = 0; attempt < 3; attempt++) {
      const refused = await callAgent(h.socketPath, { op: "take", seconds: 7200, reason: "three" });
      expect(refused).toMatchObject({
        ok: false,
        error: {
          code: "not_saved",
          message: expect.stringContaining("the agent could not save the lease: the disk is full"),
        },
      });
    }
    // Refused means not held either: the list is what it was, and so is the file.
    expect(leaseIds(await callAgent(h.socketPath, { op: "list" }))).toEqual(before);
    expect(await readFile(path.join(h.stateDir, "leases.json"), "utf8")).toBe(leasesFile);

    await h.restart();
    expect(leaseIds(await callAgent(h.socketPath, { op: "list" }))).toEqual(before);
    const audit = await readFile(path.join(h.stateDir, "lease-audit.log"), "utf8");
    // The audit tells the same story: each refused grant is followed by its refusal (when there was
    // room for the line), and what was granted and not refused is exactly what is stored.
    const ids = (action: string) =>
      [...audit.matchAll(new RegExp(`action=${action} id=([0-9a-f]{8})`, "g"))].map((match) => match[1]);
    const refusedIds = new Set(ids("refused"));
    expect(
      ids("granted")
        .filter((id) => !refusedIds.has(id))
        .sort(),
    ).toEqual(before);
    expect(audit.endsWith("\n")).toBe(true); // no torn line
  });
});
