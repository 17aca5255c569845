// Benchmark 1's machine: the systemd unit's way of starting the agent, what the machine has in
// accounts and homes, and `--homes N`'s real users with lived-in homes.
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdirSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import { listHomeDirs } from "../../packages/guest-agent/src/signals/jupyter-homes.js";
import { loadUsers } from "../../packages/guest-agent/src/users.js";
import type { Roots } from "../../packages/guest-agent/src/roots.js";

/** How packaging/systemd/ws-agent.service starts the agent: Node's flags and the environment it sets. */
export interface UnitLaunch {
  nodeFlags: string[];
  env: Record<string, string>;
}

/** ExecStart's flags between node and the bundle, and every Environment=NAME=VALUE. Pure. */
export function parseUnit(text: string): UnitLaunch {
  const exec = /^ExecStart=(.+)$/m.exec(text)?.[1]?.trim().split(/\s+/);
  if (!exec || !/\/node$/.test(exec[0]!)) throw new Error("ws-agent.service: ExecStart does not start node");
  const bundle = exec.findIndex((word) => word.endsWith(".cjs"));
  if (bundle < 0) throw new Error("ws-agent.service: ExecStart names no .cjs bundle");
  const env: Record<string, string> = {};
  for (const match of text.matchAll(/^Environment=(.+)$/gm)) {
    for (const pair of match[1]!.trim().split(/\s+/)) {
      const at = pair.indexOf("=");
      if (at > 0) env[pair.slice(0, at)] = pair.slice(at + 1);
    }
  }
  return { nodeFlags: exec.slice(1, bundle), env };
}

export function unitLaunch(repoRoot: string): UnitLaunch {
  return parseUnit(readFileSync(path.join(repoRoot, "packaging/systemd/ws-agent.service"), "utf8"));
}

/** Accounts in /etc/passwd, and the homes the agent looks into (its own listing, existing directories only). */
export async function accountsAndHomes(homeRoot: string): Promise<{ accounts: number; homes: number }> {
  const roots: Roots = {
    proc: "/proc",
    sys: "/sys",
    dev: "/dev",
    run: "/run",
    home: homeRoot,
    etc: "/etc",
    state: "/var/lib/ws-agent",
  };
  const users = await loadUsers(roots);
  const { homes } = await listHomeDirs(roots, users);
  const existing = homes.filter((home) => {
    try {
      return statSync(home.path).isDirectory();
    } catch {
      return false;
    }
  });
  return { accounts: users.all().length, homes: existing.length };
}

export const BENCH_USER_PREFIX = "wsbench-";

export interface BenchHome {
  name: string;
  home: string;
  uid: number;
  gid: number;
  jupyterRuntime: boolean;
  codeServer: boolean;
}

/**
 * Makes users wsbench-001… up to `count` (those already made are kept), each with a home as a
 * shared teaching VM has them: /etc/skel's files, a shell history, .cache and .local/share; every
 * third one has run Jupyter (a runtime dir with a leftover kernel file), every fifth one
 * code-server (a heartbeat). Made by root, chowned to the user.
 */
export function ensureBenchHomes(count: number, made: BenchHome[]): BenchHome[] {
  for (let i = made.length + 1; i <= count; i++) {
    const name = `${BENCH_USER_PREFIX}${String(i).padStart(3, "0")}`;
    const home = `/home/${name}`;
    if (!userExists(name)) {
      execFileSync("useradd", ["--create-home", "--home-dir", home, "--shell", "/bin/bash", "--user-group", name], {
        stdio: ["ignore", "ignore", "pipe"],
      });
    }
    const uid = Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", name], { encoding: "utf8" }).trim());
    const entry: BenchHome = { name, home, uid, gid, jupyterRuntime: i % 3 === 0, codeServer: i % 5 === 0 };
    const own = (at: string) => chownSync(at, uid, gid);
    const dir = (...parts: string[]) => {
      const at = path.join(home, ...parts);
      mkdirSync(at, { recursive: true });
      let walk = at;
      while (walk.length > home.length) {
        own(walk);
        walk = path.dirname(walk);
      }
      return at;
    };
    const file = (at: string, text: string) => {
      writeFileSync(at, text);
      own(at);
    };
    file(path.join(home, ".bash_history"), "ls\ncd notebooks\npython3 train.py\n");
    dir(".cache", "pip");
    dir(".local", "share", "nano");
    dir("notebooks");
    if (entry.jupyterRuntime) {
      const runtime = dir(".local", "share", "jupyter", "runtime");
      file(
        path.join(runtime, `kernel-${i}-0000-4000-8000-bench.json`),
        JSON.stringify({ shell_port: 40000 + i, transport: "tcp", ip: "127.0.0.1", key: "bench", kernel_name: "" }),
      );
    }
    if (entry.codeServer) {
      const heartbeat = path.join(dir(".local", "share", "code-server"), "heartbeat");
      file(heartbeat, "");
      const hourAgo = new Date(Date.now() - 3_600_000);
      utimesSync(heartbeat, hourAgo, hourAgo);
    }
    made.push(entry);
  }
  return made;
}

/** code-server touches its heartbeat about once a minute while a browser has it open: the harness does for one in two. */
export function touchHeartbeats(homes: BenchHome[]): void {
  const now = new Date();
  homes
    .filter((home) => home.codeServer)
    .forEach((home, index) => {
      if (index % 2 === 0) utimesSync(path.join(home.home, ".local/share/code-server/heartbeat"), now, now);
    });
}

/** Removes every wsbench-NNN user and home, also those a crashed run left behind. */
export function removeBenchHomes(): number {
  const names = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .map((line) => line.split(":")[0]!)
    .filter((name) => name.startsWith(BENCH_USER_PREFIX));
  for (const name of names) {
    try {
      execFileSync("userdel", ["--remove", name], { stdio: ["ignore", "ignore", "ignore"] });
    } catch {
      // userdel exits non-zero for a missing mail spool, having removed the account and home.
    }
  }
  return names.length;
}

function userExists(name: string): boolean {
  try {
    execFileSync("id", ["-u", name], { stdio: ["ignore", "ignore", "ignore"] });
    return true;
  } catch {
    return false;
  }
}

export function requireUseradd(): void {
  for (const tool of ["/usr/sbin/useradd", "/usr/sbin/userdel"])
    if (!existsSync(tool)) throw new Error(`${tool} is missing: install the Debian package passwd`);
}
