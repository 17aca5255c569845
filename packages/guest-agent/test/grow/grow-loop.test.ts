// grow against real disks: loop devices with real GPT/MBR tables and real ext4, xfs and btrfs,
// mounted, enlarged underneath like a PVC resize, then grown online by the real tools.
import { mkdtemp, readFile, rm, statfs, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createLoopDisk, requireLoopSupport, runChecked, type LoopDisk } from "../../../../test/support/loopdisk.js";
import { parseEffectiveCapabilities } from "../../src/grow/capabilities.js";
import { growCommand, runGrow } from "../../src/grow/command.js";
import type { MountResult } from "../../src/grow/execute.js";
import { parseDumpe2fsSize, parseXfsInfoSize } from "../../src/grow/fs-size.js";
import { findTools } from "../../src/grow/tools.js";
import { parseBtrfsShow } from "../../src/grow/btrfs.js";
import { spawnRunner } from "../../src/grow/exec.js";
import { executeGrow, systemProbe } from "../../src/grow/execute.js";
import { deviceFacts, type GrowFacts } from "../../src/grow/facts.js";
import { LVS_FIELDS, PVS_FIELDS, parseLvsJson, parsePvsJson, physicalVolumeHasRoom } from "../../src/grow/lvm.js";
import { planGrow } from "../../src/grow/plan.js";
import { readBlockByName } from "../../src/grow/sysblock.js";

const MiB = 1024 * 1024;

let workDir: string;
const disks: LoopDisk[] = [];

beforeAll(async () => {
  await requireLoopSupport(["ext4", "xfs", "btrfs"]);
  const tools = await findTools(process.env.PATH);
  for (const [tool, found] of Object.entries(tools)) {
    if (!found)
      throw new Error(
        `${tool} is missing: run scripts/install-test-deps.sh (Debian packages cloud-guest-utils fdisk util-linux e2fsprogs xfsprogs btrfs-progs lvm2)`,
      );
  }
  workDir = await mkdtemp(path.join(os.tmpdir(), "ws-grow-"));
});

afterEach(async () => {
  const errors: unknown[] = [];
  for (const disk of disks.splice(0)) await disk.detach().catch((error: unknown) => errors.push(error));
  if (errors.length > 0) throw errors[0];
});

afterAll(async () => {
  if (workDir) await rm(workDir, { recursive: true, force: true });
});

function capture() {
  let stdout = "";
  let stderr = "";
  const stream = (append: (text: string) => void) =>
    ({
      write(chunk: string | Uint8Array) {
        append(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString());
        return true;
      },
    }) as unknown as NodeJS.WritableStream;
  return {
    io: { stdout: stream((t) => (stdout += t)), stderr: stream((t) => (stderr += t)), env: process.env },
    stdout: () => stdout,
    stderr: () => stderr,
  };
}

async function grow(
  args: string[],
): Promise<{ code: number; report: { ok: boolean; dryRun: boolean; mounts: MountResult[] }; text: string }> {
  const out = capture();
  const code = await growCommand([...args, "--json"], out.io);
  const text = out.stdout();
  expect(out.stderr()).toBe("");
  return { code, report: JSON.parse(text), text };
}

async function dfBytes(mountPoint: string): Promise<number> {
  const stats = await statfs(mountPoint);
  return stats.blocks * stats.bsize;
}

async function newDisk(options: Parameters<typeof createLoopDisk>[0]): Promise<LoopDisk> {
  const disk = await createLoopDisk(options);
  disks.push(disk);
  return disk;
}

async function xfsBytes(mountPoint: string): Promise<number> {
  return parseXfsInfoSize(await runChecked(["xfs_info", mountPoint]));
}

async function btrfsBytes(mountPoint: string): Promise<number> {
  const devices = parseBtrfsShow(await runChecked(["btrfs", "filesystem", "show", "--raw", mountPoint]));
  expect(devices).toHaveLength(1);
  return devices[0]!.sizeBytes;
}

/** btrfs sizes its device in whole 4 KiB sectors; the partition need not be a multiple of that. */
function expectFills(filesystemBytes: number, deviceBytes: number): void {
  expect(filesystemBytes).toBeLessThanOrEqual(deviceBytes);
  expect(deviceBytes - filesystemBytes).toBeLessThan(4096);
}

const hasSysResource = async () => parseEffectiveCapabilities(await readFile("/proc/self/status", "utf8")).sysResource;

describe("ws-agent grow on real loop devices", () => {
  it("grows the last GPT partition and its mounted xfs filesystem online; a second run changes nothing", async () => {
    const disk = await newDisk({ dir: workDir, sizeMiB: 360, label: "gpt", partitions: [{ sizeMiB: 8 }, {}] });
    const mountPoint = path.join(workDir, "xfs");
    await disk.mkfs(2, "xfs");
    await disk.mount(2, mountPoint);
    const partitionBefore = await disk.partitionBytes(2);
    const xfsBefore = await xfsBytes(mountPoint);
    const dfBefore = await dfBytes(mountPoint);

    await disk.enlarge(640);
    const first = await grow(["--mount", mountPoint]);
    expect(first.code, first.text).toBe(0);
    const mount = first.report.mounts[0]!;
    expect(mount).toMatchObject({ mountPoint, fsType: "xfs", device: disk.partition(2), status: "grown" });
    expect(mount.steps.map((step) => [step.kind, step.outcome])).toEqual([
      ["grow-partition", "changed"],
      ["grow-filesystem", "changed"],
    ]);
    expect(mount.steps[0]!.detail).toMatch(/^CHANGED: partition=2/);
    expect(await disk.partitionBytes(2)).toBeGreaterThan(partitionBefore + 250 * MiB);
    expect(await xfsBytes(mountPoint)).toBeGreaterThan(xfsBefore + 250 * MiB);
    expect(await dfBytes(mountPoint)).toBeGreaterThan(dfBefore + 250 * MiB);

    const second = await grow(["--mount", mountPoint]);
    expect(second.code, second.text).toBe(0);
    expect(second.report.mounts[0]).toMatchObject({ status: "unchanged", steps: [], refusals: [] });
    expect(second.report.mounts[0]!.notes.join("\n")).toMatch(
      /already reaches the end of the disk[\s\S]*already fills/,
    );
  });

  it("grows the last MBR (dos) partition and its mounted btrfs filesystem", async () => {
    const disk = await newDisk({ dir: workDir, sizeMiB: 200, label: "dos", partitions: [{ sizeMiB: 8 }, {}] });
    const mountPoint = path.join(workDir, "btrfs-dos");
    await disk.mkfs(2, "btrfs");
    await disk.mount(2, mountPoint);
    const btrfsBefore = await btrfsBytes(mountPoint);

    await disk.enlarge(400);
    const first = await grow(["--mount", mountPoint]);
    expect(first.code, first.text).toBe(0);
    expect(first.report.mounts[0]!.steps.map((step) => [step.kind, step.outcome])).toEqual([
      ["grow-partition", "changed"],
      ["grow-filesystem", "changed"],
    ]);
    expect(await btrfsBytes(mountPoint)).toBeGreaterThan(btrfsBefore + 150 * MiB);
    expectFills(await btrfsBytes(mountPoint), await disk.partitionBytes(2));

    const second = await grow(["--mount", mountPoint]);
    expect(second.code, second.text).toBe(0);
    expect(second.report.mounts[0]!.status).toBe("unchanged");
  });

  it.each(["gpt", "dos"] as const)(
    "grows with sfdisk and partx when growpart is not installed (%s, btrfs)",
    async (label) => {
      const disk = await newDisk({ dir: workDir, sizeMiB: 200, label, partitions: [{ sizeMiB: 8 }, {}] });
      const mountPoint = path.join(workDir, `btrfs-sfdisk-${label}`);
      await disk.mkfs(2, "btrfs");
      await disk.mount(2, mountPoint);
      const partitionBefore = await disk.partitionBytes(2);
      await disk.enlarge(360);

      const tools = { ...(await findTools(process.env.PATH)), growpart: null };
      const first = await runGrow({ mounts: [mountPoint], dryRun: false, env: process.env, tools });
      expect(first.exitCode, JSON.stringify(first.results, null, 2)).toBe(0);
      const steps = first.results[0]!.steps;
      expect(steps[0]!.commands.map((argv) => argv.slice(1).join(" "))).toEqual([
        ...(label === "gpt" ? [`--no-reread --no-tell-kernel --relocate gpt-bak-std ${disk.device}`] : []),
        `--no-reread --no-tell-kernel -N 2 ${disk.device}`,
        `--update --nr 2 ${disk.device}`,
      ]);
      expect(steps.map((step) => step.outcome)).toEqual(["changed", "changed"]);
      const partitionAfter = await disk.partitionBytes(2);
      expect(partitionAfter).toBeGreaterThan(partitionBefore + 150 * MiB);
      expectFills(await btrfsBytes(mountPoint), partitionAfter);
      // The table on disk agrees with the kernel (for GPT, with its backup header at the new end).
      const table = JSON.parse(await runChecked(["sfdisk", "--json", disk.device])).partitiontable;
      expect(table.partitions[1].size * 512).toBe(partitionAfter);
      if (label === "gpt") expect(table.lastlba).toBeGreaterThan(360 * 2048 - 40);

      const second = await runGrow({ mounts: [mountPoint], dryRun: false, env: process.env, tools });
      expect(second.exitCode).toBe(0);
      expect(second.results[0]!.status).toBe("unchanged");
    },
  );

  it("grows the partition under a mounted ext4 filesystem, and the filesystem online where the process may (CAP_SYS_RESOURCE)", async () => {
    const disk = await newDisk({ dir: workDir, sizeMiB: 64, label: "gpt", partitions: [{ sizeMiB: 8 }, {}] });
    const mountPoint = path.join(workDir, "ext4");
    await disk.mkfs(2, "ext4");
    await disk.mount(2, mountPoint);
    const ext4Before = parseDumpe2fsSize(await runChecked(["dumpe2fs", "-h", disk.partition(2)]));
    const dfBefore = await dfBytes(mountPoint);
    const partitionBefore = await disk.partitionBytes(2);

    await disk.enlarge(160);
    const first = await grow(["--mount", mountPoint]);
    const mount = first.report.mounts[0]!;
    expect(mount.steps[0]).toMatchObject({ kind: "grow-partition", outcome: "changed" });
    expect(await disk.partitionBytes(2)).toBeGreaterThan(partitionBefore + 90 * MiB);
    const ext4After = parseDumpe2fsSize(await runChecked(["dumpe2fs", "-h", disk.partition(2)]));

    if (await hasSysResource()) {
      expect(first.code, first.text).toBe(0);
      expect(mount.steps[1]).toMatchObject({ kind: "grow-filesystem", outcome: "changed" });
      expect(ext4After).toBeGreaterThan(ext4Before + 90 * MiB);
      expect(await dfBytes(mountPoint)).toBeGreaterThan(dfBefore + 80 * MiB);
      const second = await grow(["--mount", mountPoint]);
      expect(second.code, second.text).toBe(0);
      expect(second.report.mounts[0]!.status).toBe("unchanged");
    } else {
      // Root without CAP_SYS_RESOURCE (a container or sandbox): the kernel refuses ext4's online
      // resize with EPERM, so grow says so up front instead of failing halfway.
      expect(first.code, first.text).toBe(1);
      expect(mount.status).toBe("refused");
      expect(mount.steps).toHaveLength(1);
      expect(mount.refusals.join("\n")).toMatch(/needs CAP_SYS_RESOURCE/);
      expect(ext4After).toBe(ext4Before);
      const second = await grow(["--mount", mountPoint]);
      expect(second.code).toBe(1);
      expect(second.report.mounts[0]!.steps).toEqual([]);
      expect(second.report.mounts[0]!.notes.join("\n")).toMatch(/already reaches the end of the disk/);
    }
  });

  it("refuses to grow a partition that is not the last one, and leaves the disk alone", async () => {
    const disk = await newDisk({
      dir: workDir,
      sizeMiB: 200,
      label: "gpt",
      partitions: [{ sizeMiB: 150 }, { sizeMiB: 20 }],
    });
    const mountPoint = path.join(workDir, "not-last");
    await disk.mkfs(1, "btrfs");
    await disk.mount(1, mountPoint);
    const tableBefore = await runChecked(["sfdisk", "--dump", disk.device]);
    const btrfsBefore = await btrfsBytes(mountPoint);

    await disk.enlarge(400);
    const result = await grow(["--mount", mountPoint]);
    expect(result.code, result.text).toBe(1);
    const mount = result.report.mounts[0]!;
    expect(mount.status).toBe("refused");
    expect(mount.steps).toEqual([]);
    expect(mount.refusals.join("\n")).toMatch(
      /partition 1 of \/dev\/loop\d+ is not the last partition \(partition 2 comes after it\)/,
    );
    expect(await runChecked(["sfdisk", "--dump", disk.device])).toBe(tableBefore);
    expect(await btrfsBytes(mountPoint)).toBe(btrfsBefore);
  });

  it("--dry-run prints the plan and changes nothing", async () => {
    const disk = await newDisk({ dir: workDir, sizeMiB: 200, label: "gpt", partitions: [{ sizeMiB: 8 }, {}] });
    const mountPoint = path.join(workDir, "dry-run");
    await disk.mkfs(2, "btrfs");
    await disk.mount(2, mountPoint);
    await disk.enlarge(300);
    const tableBefore = await runChecked(["sfdisk", "--dump", disk.device]);
    const partitionBefore = await disk.partitionBytes(2);
    const btrfsBefore = await btrfsBytes(mountPoint);

    const json = await grow(["--mount", mountPoint, "--dry-run"]);
    expect(json.code, json.text).toBe(0);
    expect(json.report.dryRun).toBe(true);
    expect(json.report.mounts[0]!.steps.map((step) => [step.kind, step.outcome])).toEqual([
      ["grow-partition", "planned"],
      ["grow-filesystem", "planned"],
    ]);
    const out = capture();
    expect(await growCommand(["--mount", mountPoint, "--dry-run"], out.io)).toBe(0);
    expect(out.stdout()).toMatch(/^dry run: nothing is changed/);
    expect(out.stdout()).toContain(
      `$ /usr/bin/growpart ${disk.device} 2`.replace(
        "/usr/bin/growpart",
        (await findTools(process.env.PATH)).growpart!,
      ),
    );
    expect(out.stdout()).toMatch(/would run +grow the btrfs filesystem/);

    expect(await runChecked(["sfdisk", "--dump", disk.device])).toBe(tableBefore);
    expect(await disk.partitionBytes(2)).toBe(partitionBefore);
    expect(await btrfsBytes(mountPoint)).toBe(btrfsBefore);
  });

  it("reports a failing step and still runs the ones after it", async () => {
    const disk = await newDisk({ dir: workDir, sizeMiB: 200, label: "gpt", partitions: [{ sizeMiB: 8 }, {}] });
    const mountPoint = path.join(workDir, "failing-step");
    await disk.mkfs(2, "btrfs");
    await disk.mount(2, mountPoint);
    const before = await btrfsBytes(mountPoint);
    // A partition grown earlier and a filesystem that has not followed: only the filesystem step is due.
    await disk.enlarge(300);
    const tools = await findTools(process.env.PATH);
    await runChecked([tools.growpart!, disk.device, "2"]);
    const run = spawnRunner(process.env);
    const plan = {
      requested: mountPoint,
      mountPoint,
      fsType: "btrfs",
      device: disk.partition(2),
      refusals: [],
      notes: [],
      steps: [
        {
          step: {
            kind: "grow-partition" as const,
            via: "growpart" as const,
            disk: disk.device,
            partition: 7,
            partitionPath: `${disk.device}p7`,
            freeBytes: MiB,
          },
          commands: [{ argv: [tools.growpart!, disk.device, "7"] }],
          description: "grow a partition that does not exist",
        },
        {
          step: { kind: "grow-filesystem" as const, fsType: "btrfs", device: disk.partition(2), mountPoint },
          commands: [{ argv: [tools.btrfs!, "filesystem", "resize", "1:max", mountPoint] }],
          description: "grow the btrfs filesystem",
        },
      ],
    };
    const [result] = await executeGrow([plan], { dryRun: false, run, probe: systemProbe("/sys", tools, run) });
    expect(result!.status).toBe("failed");
    expect(result!.steps[0]).toMatchObject({ outcome: "failed", detail: expect.stringMatching(/^FAILED: /) });
    expect(result!.steps[1], JSON.stringify(result, null, 2)).toMatchObject({ outcome: "changed" });
    expect(await btrfsBytes(mountPoint)).toBeGreaterThan(before + 90 * MiB);
  });

  it("LVM on the last partition: grows the partition and the physical volume, then extends the logical volume", async () => {
    const disk = await newDisk({ dir: workDir, sizeMiB: 64, label: "gpt", partitions: [{ sizeMiB: 8 }, {}] });
    const vg = `wsgrow${process.pid}`;
    const pvPath = disk.partition(2);
    await runChecked(["pvcreate", "-q", "-y", pvPath]);
    try {
      await runChecked(["vgcreate", "-q", vg, pvPath]);
      await restoreWithLinearVolume(vg, "root", 6);
      await disk.enlarge(160);

      const tools = await findTools(process.env.PATH);
      const run = spawnRunner(process.env);
      const report = (tool: string, args: string[]) =>
        runChecked([tool, "--reportformat", "json", "--units", "b", "--nosuffix", ...args]);
      const lv = parseLvsJson(await report("lvs", ["--segments", "-o", LVS_FIELDS, vg]))[0]!;
      const pv = parsePvsJson(await report("pvs", ["-o", PVS_FIELDS, pvPath]))[0]!;
      const env = { procRoot: "/proc", sysRoot: "/sys", devRoot: "/dev", tools, run };
      // The mount and the dm node stand in for what /sys shows once the LV is active; the rest is real.
      const facts: GrowFacts = {
        tools,
        capabilities: { sysAdmin: true, sysResource: true },
        targets: [
          {
            requested: "/srv/lvm",
            mount: {
              mountId: 1,
              parentId: 0,
              major: 253,
              minor: 0,
              root: "/",
              mountPoint: "/srv/lvm",
              fsType: "ext4",
              source: lv.dmPath,
            },
            device: {
              kind: "lvm",
              node: { name: "dm-0", devPath: lv.dmPath, sizeBytes: lv.sizeBytes },
              dmName: `${vg}-root`,
              lv,
              lvError: null,
              physicalVolumes: [
                { device: await deviceFacts(env, await readBlockByName("/sys", `${disk.name}p2`)), pv, pvError: null },
              ],
            },
            btrfsDevices: null,
            btrfsError: null,
            filesystemBytes: lv.sizeBytes,
            filesystemOnDeviceBytes: lv.sizeBytes,
            filesystemSizeError: null,
            problem: null,
          },
        ],
      };
      const [plan] = planGrow(facts);
      expect(plan!.steps.map((step) => step.step.kind)).toEqual([
        "grow-partition",
        "pvresize",
        "lvextend",
        "grow-filesystem",
      ]);
      // An LV carries a filesystem only once active, which needs the kernel's device-mapper;
      // the filesystem step is exercised on partitions above.
      plan!.steps = plan!.steps.filter((step) => step.step.kind !== "grow-filesystem");
      const [result] = await executeGrow([plan!], { dryRun: false, run, probe: systemProbe("/sys", tools, run) });
      const [partition, pvresize, lvextend] = result!.steps;
      expect(partition).toMatchObject({ kind: "grow-partition", outcome: "changed" });
      // LVM 2.03 may notice the grown device by itself while reading it; either way the PV
      // must reach the end of its partition once pvresize ran.
      expect(pvresize!.kind).toBe("pvresize");
      expect(["changed", "unchanged"]).toContain(pvresize!.outcome);
      const pvAfter = parsePvsJson(await report("pvs", ["-o", PVS_FIELDS, pvPath]))[0]!;
      expect(pvAfter.sizeBytes).toBeGreaterThan(pv.sizeBytes + 90 * MiB);
      expect(physicalVolumeHasRoom(pvAfter, lv.extentBytes)).toBe(false);
      const lvAfter = parseLvsJson(await report("lvs", ["--segments", "-o", LVS_FIELDS, vg]))[0]!;
      // lvm makes /dev/mapper/control itself; whether the kernel has device-mapper shows in /proc/misc.
      if (/\bdevice-mapper\b/.test(await readFile("/proc/misc", "utf8"))) {
        expect(lvextend).toMatchObject({ kind: "lvextend", outcome: "changed" });
        expect(lvAfter.sizeBytes).toBeGreaterThan(lv.sizeBytes + 90 * MiB);
        expect(lvAfter.vgFreeBytes).toBe(0);
      } else {
        // This kernel has no device-mapper (CONFIG_BLK_DEV_DM off): lvextend cannot suspend the
        // volume. The failure is reported with lvm's words, after the steps before it were done.
        expect(lvextend).toMatchObject({ kind: "lvextend", outcome: "failed" });
        expect(lvextend!.detail).toMatch(/device-mapper|suspend/i);
        expect(result!.status).toBe("failed");
        expect(lvAfter.vgFreeBytes).toBeGreaterThan(90 * MiB);
      }
    } finally {
      await runChecked(["vgremove", "-q", "-f", vg]).catch(() => undefined);
      await runChecked(["pvremove", "-q", "-y", pvPath]).catch(() => undefined);
    }
  });
});

/**
 * Adds a linear logical volume to a volume group's metadata with vgcfgrestore: lvcreate would
 * also activate it, which needs device-mapper in the kernel; this works with or without it.
 */
async function restoreWithLinearVolume(vg: string, lv: string, extents: number): Promise<void> {
  const backup = path.join(workDir, `${vg}.vg`);
  await runChecked(["vgcfgbackup", "-q", "-f", backup, vg]);
  const text = await readFile(backup, "utf8");
  const volume = [
    "",
    "\tlogical_volumes {",
    `\t\t${lv} {`,
    '\t\t\tid = "ws0000-0000-0000-0000-0000-0000-000000"',
    '\t\t\tstatus = ["READ", "WRITE", "VISIBLE"]',
    "\t\t\tflags = []",
    "\t\t\tsegment_count = 1",
    "\t\t\tsegment1 {",
    "\t\t\t\tstart_extent = 0",
    `\t\t\t\textent_count = ${extents}`,
    '\t\t\t\ttype = "striped"',
    "\t\t\t\tstripe_count = 1",
    '\t\t\t\tstripes = ["pv0", 0]',
    "\t\t\t}",
    "\t\t}",
    "\t}",
    "",
  ].join("\n");
  const end = text.lastIndexOf("}");
  await writeFile(backup, `${text.slice(0, end)}${volume}${text.slice(end)}`);
  await runChecked(["vgcfgrestore", "-q", "-f", backup, vg]);
}
