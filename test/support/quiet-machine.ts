// A machine tree where nothing happens: a captured /proc snapshot (static, so
// every rate is zero), the captured /sys listings, and empty /run, /dev and
// homes. Agents pointed at it report an idle VM, whatever this host is doing.
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { repoRoot } from "./process.js";

const fixtures = path.join(repoRoot, "packages/guest-agent/test/fixtures/proc");

export interface QuietMachine {
  root: string;
  /** ws-agent flags that read this tree instead of the host. */
  flags: string[];
  stateDir: string;
  socket: string;
  remove(): Promise<void>;
}

async function lines(file: string): Promise<string[]> {
  return (await readFile(path.join(fixtures, file), "utf8"))
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
}

export async function quietMachine(): Promise<QuietMachine> {
  const root = await mkdtemp(path.join(os.tmpdir(), "ws-quiet-"));
  const dir = (name: string) => path.join(root, name);
  await cp(path.join(fixtures, "snapshot-1"), dir("proc"), { recursive: true });
  await mkdir(path.join(dir("proc"), "sys/kernel/random"), { recursive: true });
  await writeFile(path.join(dir("proc"), "sys/kernel/random/boot_id"), "3f1c2a9e-0000-4000-8000-000000000001\n");
  const sysDirs = [
    ...(await lines("sys-block.txt")).map((name) => path.join("block", name)),
    ...(await lines("sys-virtual-block.txt")).map((name) => path.join("devices/virtual/block", name)),
    ...(await lines("sys-virtual-net.txt")).map((name) => path.join("devices/virtual/net", name)),
  ];
  for (const sub of sysDirs) await mkdir(path.join(dir("sys"), sub), { recursive: true });
  for (const name of ["run", "dev/pts", "home", "etc", "state"]) await mkdir(dir(name), { recursive: true });
  await cp(path.join(fixtures, "passwd"), path.join(dir("etc"), "passwd"));
  const socket = path.join(root, "run-ws", "agent.sock");
  await mkdir(path.dirname(socket), { recursive: true, mode: 0o755 });
  return {
    root,
    stateDir: dir("state"),
    socket,
    flags: [
      "--proc-root",
      dir("proc"),
      "--sys-root",
      dir("sys"),
      "--run-root",
      dir("run"),
      "--dev-root",
      dir("dev"),
      "--home-root",
      dir("home"),
      "--etc-root",
      dir("etc"),
      "--state-dir",
      dir("state"),
      "--socket",
      socket,
      "--gpu-command",
      path.join(root, "no-nvidia-smi"),
    ],
    remove: () => rm(root, { recursive: true, force: true }),
  };
}
