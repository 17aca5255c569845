import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { manualClock } from "../../src/clock.js";
import { defaultRoots } from "../../src/roots.js";
import { createDiskSignal, type DiskSignalValue } from "../../src/signals/disk.js";
import { mountUsage } from "../../src/signals/disk-parse.js";
import type { SignalContext, SignalOutcome } from "../../src/signals/types.js";
import { usersFrom } from "../../src/users.js";

const run = promisify(execFile);

interface DfLine {
  source: string;
  fsType: string;
  size: bigint;
  used: bigint;
  available: bigint;
}

/** What coreutils' df says about the filesystem holding a path, in bytes. */
async function df(target: string): Promise<DfLine> {
  const { stdout } = await run("df", ["-B1", "--output=source,fstype,size,used,avail", target]);
  const [source, fsType, size, used, available] = stdout.trim().split("\n")[1]!.trim().split(/\s+/) as [
    string,
    string,
    string,
    string,
    string,
  ];
  return { source, fsType, size: BigInt(size), used: BigInt(used), available: BigInt(available) };
}

const ctx: SignalContext = {
  roots: defaultRoots,
  clock: manualClock(),
  users: usersFrom([]),
  signal: new AbortController().signal,
};

function mountsOf(outcome: SignalOutcome<DiskSignalValue>) {
  if (outcome.state === "absent" || outcome.value === undefined)
    throw new Error(`no value: ${JSON.stringify(outcome)}`);
  return outcome.value.mounts ?? [];
}

describe("disk signal", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "ws-disk-"));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("reports /, a temporary directory and /dev/shm (a tmpfs) as df sees them", async () => {
    const outcome = await createDiskSignal({ mounts: ["/", dir, "/dev/shm"] }).collect(ctx);
    expect(outcome.state).toBe("ok");
    const [root, temporary, shm] = mountsOf(outcome);
    for (const [mount, target] of [
      [root, "/"],
      [temporary, dir],
      [shm, "/dev/shm"],
    ] as const) {
      const expected = await df(target);
      expect(mount).toMatchObject({
        mountPoint: target,
        device: expected.source,
        fsType: expected.fsType,
        sizeBytes: expected.size,
      });
      // Other processes write meanwhile; used and available agree with df within 1 GiB.
      const slack = 1n << 30n;
      expect(mount?.usedBytes).toBeGreaterThanOrEqual(expected.used - slack);
      expect(mount?.usedBytes).toBeLessThanOrEqual(expected.used + slack);
      expect(mount?.availableBytes).toBeGreaterThanOrEqual(expected.available - slack);
      expect(mount?.availableBytes).toBeLessThanOrEqual(expected.available + slack);
      expect((mount?.usedBytes ?? 0n) + (mount?.availableBytes ?? 0n)).toBeLessThanOrEqual(mount?.sizeBytes ?? 0n);
    }
    expect(shm?.fsType).toBe("tmpfs");
  });

  it("a missing mount is failed with the reason; the others are still reported", async () => {
    const missing = path.join(dir, "no-such-dir");
    const outcome = await createDiskSignal({ mounts: ["/", missing] }).collect(ctx);
    expect(outcome.state).toBe("failed");
    expect(outcome.message).toMatch(new RegExp(`^${missing}: ENOENT`));
    expect(mountsOf(outcome).map((mount) => mount.mountPoint)).toEqual(["/"]);
  });

  it("an unreadable mount table leaves device and type empty, and says why", async () => {
    const outcome = await createDiskSignal({ mounts: ["/"] }).collect({
      ...ctx,
      roots: { ...defaultRoots, proc: path.join(dir, "no-proc") },
    });
    expect(outcome.state).toBe("failed");
    expect(outcome.message).toContain(path.join(dir, "no-proc", "self", "mounts"));
    expect(mountsOf(outcome)[0]).toMatchObject({ mountPoint: "/", device: "", fsType: "" });
  });

  it("no configured mount is absent; a relative one is a configuration error", async () => {
    expect(await createDiskSignal({ mounts: [] }).collect(ctx)).toEqual({
      state: "absent",
      message: "no mounts configured",
    });
    expect(() => createDiskSignal({ mounts: ["home"] })).toThrow(/must be absolute paths: home/);
  });

  it("sizes follow df: used is total less free, available excludes the root reserve", () => {
    const entry = { device: "/dev/vda1", mountPoint: "/", fsType: "ext4", options: "rw" };
    expect(mountUsage("/", entry, { bsize: 4096n, blocks: 1000n, bfree: 300n, bavail: 250n })).toEqual({
      mountPoint: "/",
      device: "/dev/vda1",
      fsType: "ext4",
      sizeBytes: 4096000n,
      usedBytes: 700n * 4096n,
      availableBytes: 250n * 4096n,
    });
  });
});
