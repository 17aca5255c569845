// Real disks for the grow tests: a sparse image file, a real partition table (sfdisk), a loop
// device with its partitions, real filesystems, mounted. Needs root, /dev/loop-control and the
// Debian packages mount (losetup), fdisk (sfdisk), util-linux (partx), e2fsprogs, xfsprogs,
// btrfs-progs.
//
// Kernels built without partition-table parsers (CONFIG_EFI_PARTITION and CONFIG_MSDOS_PARTITION
// off, as in some CI sandboxes) attach a loop device with --partscan and find no partitions.
// `partx --add` reads the table in user space and adds them with the BLKPG ioctl, which works
// everywhere; growpart already tells the kernel about a grown partition the same way
// (`partx --update`). Without udev or devtmpfs the /dev nodes are made with mknod from /sys.
import { spawn } from "node:child_process";
import { constants } from "node:fs";
import { access, mkdir, open, readdir, readFile, rm, stat, truncate } from "node:fs/promises";
import path from "node:path";

export type PartitionLabel = "gpt" | "dos";
export type FilesystemType = "ext4" | "xfs" | "btrfs";

export interface LoopDiskOptions {
  /** Directory the image file is created in. */
  dir: string;
  sizeMiB: number;
  label: PartitionLabel;
  /** In order on the disk; a partition without sizeMiB takes the rest (it must be last). */
  partitions: Array<{ sizeMiB?: number }>;
}

export interface LoopDisk {
  image: string;
  /** /dev/loopN */
  device: string;
  /** loopN */
  name: string;
  /** /dev/loopNpM */
  partition(number: number): string;
  mkfs(number: number, type: FilesystemType): Promise<void>;
  /** Mounts partition `number` on `mountPoint` (created if missing); detach() unmounts it. */
  mount(number: number, mountPoint: string): Promise<void>;
  /** Enlarges the backing file and tells the loop device (`losetup -c`), like a PVC resize does. */
  enlarge(sizeMiB: number): Promise<void>;
  /** Size in bytes as the kernel sees it, from /sys. */
  partitionBytes(number: number): Promise<number>;
  diskBytes(): Promise<number>;
  /** Unmounts what mount() mounted and detaches the loop device. Safe to call twice. */
  detach(): Promise<void>;
}

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const PACKAGE_OF: Record<string, string> = {
  losetup: "mount",
  mount: "mount",
  umount: "mount",
  sfdisk: "fdisk",
  partx: "util-linux",
  "mkfs.ext4": "e2fsprogs",
  "mkfs.xfs": "xfsprogs",
  "mkfs.btrfs": "btrfs-progs",
};

export function run(argv: string[], input?: string): Promise<RunResult> {
  return new Promise((resolve) => {
    const [file, ...args] = argv;
    const child = spawn(file!, args, {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, LANG: "C", LC_ALL: "C" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", (error: NodeJS.ErrnoException) => {
      const hint =
        error.code === "ENOENT" && PACKAGE_OF[file!] ? ` (install the Debian package ${PACKAGE_OF[file!]})` : "";
      resolve({ code: null, stdout, stderr: `${error.message}${hint}` });
    });
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.on("error", () => undefined);
    child.stdin.end(input ?? "");
  });
}

export async function runChecked(argv: string[], input?: string): Promise<string> {
  const result = await run(argv, input);
  if (result.code !== 0) {
    throw new Error(`${argv.join(" ")} failed (exit ${result.code}): ${result.stderr.trim() || result.stdout.trim()}`);
  }
  return result.stdout;
}

async function pollUntil<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await stat(file);
    return true;
  } catch {
    return false;
  }
}

/** Fails with what is missing (and the Debian package) when this machine cannot make loop disks. */
export async function requireLoopSupport(filesystems: FilesystemType[] = []): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error("loop-device tests need root (losetup, mount)");
  try {
    await access("/dev/loop-control", constants.W_OK);
  } catch {
    throw new Error(
      "/dev/loop-control is missing: the kernel needs the loop module (modprobe loop); losetup comes from the Debian package mount",
    );
  }
  for (const tool of ["losetup", "sfdisk", "partx", "mount", "umount", ...filesystems.map((fs) => `mkfs.${fs}`)]) {
    const result = await run([tool, "--version"]);
    if (result.code === null)
      throw new Error(`${tool} is not installed: install the Debian package ${PACKAGE_OF[tool] ?? tool}`);
  }
  const free = await run(["losetup", "--find"]);
  if (free.code !== 0) throw new Error(`losetup --find cannot find a free loop device: ${free.stderr.trim()}`);
}

function sfdiskScript(options: LoopDiskOptions): string {
  const lines = [`label: ${options.label}`];
  options.partitions.forEach((partition, index) => {
    if (partition.sizeMiB === undefined && index !== options.partitions.length - 1) {
      throw new Error("only the last partition may take the rest of the disk");
    }
    lines.push(partition.sizeMiB === undefined ? "," : `,${partition.sizeMiB}M`);
  });
  return `${lines.join("\n")}\n`;
}

export async function createLoopDisk(options: LoopDiskOptions): Promise<LoopDisk> {
  await mkdir(options.dir, { recursive: true });
  const image = path.join(options.dir, `disk-${process.pid}-${Math.random().toString(36).slice(2, 8)}.img`);
  const handle = await open(image, "w");
  await handle.truncate(options.sizeMiB * 1024 * 1024);
  await handle.close();
  await runChecked(["sfdisk", "--quiet", image], sfdiskScript(options));

  const device = (await runChecked(["losetup", "--find", "--show", "--partscan", image])).trim();
  const name = path.basename(device);
  const sysDisk = path.join("/sys/block", name);
  const mounted: string[] = [];
  const madeNodes: string[] = [];
  let addedByPartx = false;
  let detached = false;
  const partitionName = (number: number) => `${name}p${number}`;

  const disk: LoopDisk = {
    image,
    device,
    name,
    partition: (number) => `/dev/${partitionName(number)}`,
    async mkfs(number, type) {
      const force = type === "ext4" ? "-F" : "-f";
      await runChecked([`mkfs.${type}`, "-q", force, disk.partition(number)]);
    },
    async mount(number, mountPoint) {
      await mkdir(mountPoint, { recursive: true });
      await runChecked(["mount", disk.partition(number), mountPoint]);
      mounted.push(mountPoint);
    },
    async enlarge(sizeMiB) {
      const bytes = sizeMiB * 1024 * 1024;
      await truncate(image, bytes);
      await runChecked(["losetup", "--set-capacity", device]);
      await pollUntil(`${device} to show ${bytes} bytes`, async () =>
        (await disk.diskBytes()) === bytes ? true : undefined,
      );
    },
    async partitionBytes(number) {
      return Number((await readFile(path.join(sysDisk, partitionName(number), "size"), "utf8")).trim()) * 512;
    },
    async diskBytes() {
      return Number((await readFile(path.join(sysDisk, "size"), "utf8")).trim()) * 512;
    },
    async detach() {
      if (detached) return;
      detached = true;
      const errors: string[] = [];
      for (const mountPoint of mounted.reverse()) {
        const result = await run(["umount", mountPoint]);
        if (result.code !== 0) {
          const lazy = await run(["umount", "--lazy", mountPoint]);
          if (lazy.code !== 0) errors.push(`umount ${mountPoint}: ${result.stderr.trim()}`);
        }
      }
      if (addedByPartx) await run(["partx", "--delete", device]);
      const detach = await run(["losetup", "--detach", device]);
      if (detach.code !== 0) errors.push(`losetup --detach ${device}: ${detach.stderr.trim()}`);
      for (const node of madeNodes) await rm(node, { force: true });
      await rm(image, { force: true });
      if (errors.length > 0) throw new Error(errors.join("; "));
    },
  };

  try {
    const expected = options.partitions.map((_, index) => partitionName(index + 1));
    const present = new Set(await readdir(sysDisk));
    if (!expected.every((partition) => present.has(partition))) {
      // No partition-table parser in this kernel: read the table in user space instead.
      await runChecked(["partx", "--add", device]);
      addedByPartx = true;
    }
    for (const partition of expected) {
      await pollUntil(`/sys/block/${name}/${partition}`, async () =>
        (await exists(path.join(sysDisk, partition))) ? true : undefined,
      );
      const node = `/dev/${partition}`;
      const appeared = await pollUntil(`${node}`, async () => ((await exists(node)) ? true : undefined), 3_000).catch(
        () => false,
      );
      if (!appeared) {
        const [major, minor] = (await readFile(path.join(sysDisk, partition, "dev"), "utf8")).trim().split(":");
        await runChecked(["mknod", node, "b", major!, minor!]);
        madeNodes.push(node);
      }
    }
  } catch (error) {
    await disk.detach().catch(() => undefined);
    throw error;
  }
  return disk;
}
