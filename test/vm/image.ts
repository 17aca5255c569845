/**
 * Builds the VM test image, or finds it in the cache (.cache/vm/), keyed by a hash of its
 * inputs (recipe.ts and the .deb's bytes):
 *
 *   rootfs-<key>/   debootstrap --variant=minbase of bookworm with the guest packages
 *                   (the slow part; its key does not include the .deb, so a code change
 *                   only redoes the steps below)
 *   image-<key>/    disk.raw    GPT, root (ext4) on partition 1 reaching the end, the .deb
 *                               installed, like a cloud image; sparse
 *                   vmlinuz, initrd.img   the guest's own kernel, for direct kernel boot
 *                   manifest.json
 *
 * No loop device: the filesystem is made from the staged tree with `mkfs.ext4 -d`, written
 * straight into the disk file at the partition's offset (`-E offset=`).
 */
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { copyFile, mkdir, readdir, readFile, realpath, rename, rm, stat, truncate, writeFile } from "node:fs/promises";
import path from "node:path";
import { exec, execOk } from "./exec.js";
import { tool } from "./host-tools.js";
import {
  KERNEL_COMMAND_LINE,
  debianMirror,
  debootstrapArgs,
  imageRecipe,
  mountsUnder,
  parseAptSources,
  parseSfdiskJson,
  recipeKey,
  rootfsRecipe,
  SUITE,
  type AptSource,
  type ImageRecipe,
} from "./recipe.js";

export interface VmImage {
  key: string;
  disk: string;
  kernel: string;
  initrd: string;
  kernelCommandLine: string;
  /** Size of the root partition (and its filesystem) as built. */
  partitionBytes: number;
  diskBytes: number;
}

interface Manifest {
  key: string;
  recipe: ImageRecipe;
  partitionBytes: number;
}

export interface EnsureImageOptions {
  cacheDir: string;
  deb: string;
  log?: (line: string) => void;
  aptRoot?: string;
}

export async function ensureImage(options: EnsureImageOptions): Promise<VmImage> {
  const log = options.log ?? (() => {});
  await mkdir(options.cacheDir, { recursive: true });
  const mirror = await aptMirror(options.aptRoot ?? "/etc/apt");
  const rootfs = rootfsRecipe(mirror);
  const rootfsKey = recipeKey(rootfs);
  const debSha256 = createHash("sha256")
    .update(await readFile(options.deb))
    .digest("hex");
  const recipe = imageRecipe(rootfsKey, debSha256);
  const key = recipeKey(recipe);
  const imageDir = path.join(options.cacheDir, `image-${key}`);
  const image = (partitionBytes: number): VmImage => ({
    key,
    disk: path.join(imageDir, "disk.raw"),
    kernel: path.join(imageDir, "vmlinuz"),
    initrd: path.join(imageDir, "initrd.img"),
    kernelCommandLine: KERNEL_COMMAND_LINE,
    partitionBytes,
    diskBytes: recipe.diskSizeBytes,
  });

  const manifestFile = path.join(imageDir, "manifest.json");
  if (existsSync(manifestFile)) {
    const manifest = JSON.parse(await readFile(manifestFile, "utf8")) as Manifest;
    log(`vm image: cached ${path.relative(process.cwd(), imageDir)}`);
    return image(manifest.partitionBytes);
  }

  const rootfsDir = path.join(options.cacheDir, `rootfs-${rootfsKey}`);
  if (!existsSync(path.join(rootfsDir, ".ws-complete"))) {
    const started = Date.now();
    log(`vm image: debootstrap ${SUITE} (${rootfs.packages.length} packages) from ${mirror} …`);
    const partial = `${rootfsDir}.partial`;
    await removeTree(partial);
    try {
      await execOk(tool("debootstrap"), debootstrapArgs(rootfs, partial), { timeoutMs: 20 * 60_000 });
      // The downloaded packages: half the tree's size, and not part of any cloud image.
      await removeGlob(partial, "/var/cache/apt/archives/*.deb");
    } finally {
      await unmountUnder(partial);
    }
    await writeFile(path.join(partial, ".ws-complete"), `${JSON.stringify(rootfs)}\n`);
    await rename(partial, rootfsDir);
    await pruneSiblings(options.cacheDir, "rootfs-", path.basename(rootfsDir));
    log(`vm image: debootstrap done in ${Math.round((Date.now() - started) / 1000)} s`);
  }

  const started = Date.now();
  log(`vm image: building image-${key} (ws-agent .deb ${debSha256.slice(0, 12)}) …`);
  const partial = `${imageDir}.partial`;
  await removeTree(partial);
  await mkdir(partial, { recursive: true });
  const stage = path.join(partial, "root");
  await execOk("/bin/cp", ["-a", "--reflink=auto", rootfsDir, stage]);
  await rm(path.join(stage, ".ws-complete"));

  await copyFile(options.deb, path.join(stage, "tmp/ws-agent.deb"));
  await execOk(tool("chroot"), [stage, "dpkg", "-i", "/tmp/ws-agent.deb"], {
    env: { DEBIAN_FRONTEND: "noninteractive" },
    timeoutMs: 5 * 60_000,
  });
  await rm(path.join(stage, "tmp/ws-agent.deb"));
  for (const [file, contents] of Object.entries(recipe.files)) await writeFile(path.join(stage, file), contents);
  for (const pattern of recipe.removed) await removeGlob(stage, pattern);
  for (const dir of recipe.directories) await mkdir(path.join(stage, dir), { recursive: true });
  for (const unit of recipe.disabledUnits) {
    if (!existsSync(path.join(stage, "lib/systemd/system", unit))) continue;
    await execOk(tool("systemctl"), [`--root=${stage}`, "disable", unit]);
  }

  await copyFile(await realpath(path.join(stage, "vmlinuz")), path.join(partial, "vmlinuz"));
  await copyFile(await realpath(path.join(stage, "initrd.img")), path.join(partial, "initrd.img"));

  const disk = path.join(partial, "disk.raw");
  await writeFile(disk, "");
  await truncate(disk, recipe.diskSizeBytes);
  await execOk(tool("sfdisk"), ["--quiet", disk], { input: recipe.partitionScript });
  const table = parseSfdiskJson((await execOk(tool("sfdisk"), ["--json", disk])).stdout);
  const root = table.partitions[0];
  if (!root) throw new Error(`sfdisk made no partition in ${disk}`);
  const partitionBytes = root.size * table.sectorSize;
  await execOk(
    tool("mkfsExt4"),
    [
      "-q",
      "-L",
      recipe.rootLabel,
      "-d",
      stage,
      "-E",
      `offset=${root.start * table.sectorSize}`,
      disk,
      `${Math.floor(partitionBytes / 1024)}k`,
    ],
    { timeoutMs: 10 * 60_000 },
  );
  await removeTree(stage);

  const manifest: Manifest = { key, recipe, partitionBytes };
  await writeFile(path.join(partial, "manifest.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  await rename(partial, imageDir);
  await pruneSiblings(options.cacheDir, "image-", path.basename(imageDir));
  const built = image(partitionBytes);
  const usedMiB = Math.round(((await stat(built.disk)).blocks * 512) / 1024 ** 2);
  log(
    `vm image: built in ${Math.round((Date.now() - started) / 1000)} s (${usedMiB} MiB used of ${recipe.diskSizeBytes / 1024 ** 3} GiB)`,
  );
  return built;
}

async function aptMirror(aptRoot: string): Promise<string> {
  const sources: AptSource[] = [];
  const main = path.join(aptRoot, "sources.list");
  if (existsSync(main)) sources.push(...parseAptSources(await readFile(main, "utf8"), "one-line"));
  const dir = path.join(aptRoot, "sources.list.d");
  const entries = existsSync(dir) ? (await readdir(dir)).sort() : [];
  for (const entry of entries) {
    // apt itself reads only these two extensions.
    if (entry.endsWith(".sources"))
      sources.push(...parseAptSources(await readFile(path.join(dir, entry), "utf8"), "deb822"));
    else if (entry.endsWith(".list"))
      sources.push(...parseAptSources(await readFile(path.join(dir, entry), "utf8"), "one-line"));
  }
  const mirror = debianMirror(sources, SUITE);
  if (!mirror)
    throw new Error(
      `no apt source for Debian ${SUITE} main in ${aptRoot}/sources.list{,.d/}: debootstrap needs a mirror`,
    );
  return mirror;
}

/** debootstrap mounts /proc and /sys in its target: never rm -rf a tree with mounts inside. */
async function unmountUnder(dir: string): Promise<void> {
  const points = mountsUnder(await readFile("/proc/self/mountinfo", "utf8"), dir);
  for (const point of points) await exec("/bin/umount", ["--lazy", point]);
}

async function removeTree(dir: string): Promise<void> {
  if (!existsSync(dir)) return;
  await unmountUnder(dir);
  if (mountsUnder(await readFile("/proc/self/mountinfo", "utf8"), dir).length > 0) {
    throw new Error(`cannot remove ${dir}: something is still mounted inside it`);
  }
  await rm(dir, { recursive: true, force: true });
}

/** Removes `pattern` (an absolute path in the tree; `*` allowed in its last part only). */
async function removeGlob(root: string, pattern: string): Promise<void> {
  const dir = path.join(root, path.dirname(pattern));
  const base = path.basename(pattern);
  if (!base.includes("*")) {
    await rm(path.join(root, pattern), { force: true });
    return;
  }
  if (!existsSync(dir)) return;
  const matcher = new RegExp(
    `^${base
      .split("*")
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
  );
  for (const entry of await readdir(dir)) {
    if (matcher.test(entry)) await rm(path.join(dir, entry), { force: true });
  }
}

async function pruneSiblings(cacheDir: string, prefix: string, keep: string): Promise<void> {
  for (const entry of await readdir(cacheDir)) {
    if (entry.startsWith(prefix) && entry !== keep) await removeTree(path.join(cacheDir, entry));
  }
}
