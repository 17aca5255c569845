/**
 * Finds running Jupyter servers from the runtime files they write: jpserver-PID.json
 * (jupyter_server) and nbserver-PID.json (classic notebook 6), in every user's runtime dirs:
 *   ~/.local/share/jupyter/runtime      (jupyter_core's default)
 *   /run/user/UID/jupyter               ($XDG_RUNTIME_DIR/jupyter: older jupyter_core, platformdirs)
 * A file whose process is gone is stale (a crashed or killed server leaves it behind) and skipped.
 */
import { open, readdir, realpath, stat } from "node:fs/promises";
import path from "node:path";
import { under, type Roots } from "../roots.js";
import type { Users } from "../users.js";
import { isMissing, listHomeDirs } from "./jupyter-homes.js";
import { isRuntimeFileName, parseRuntimeFile, runtimeFilePid, type RuntimeInfo } from "./jupyter-parse.js";
import { errorMessage } from "./types.js";

export interface DiscoveredServer {
  runtimeFile: string;
  info: RuntimeInfo;
  pid: number;
  /** Owner of the runtime file: the user the server runs as. */
  uid: number;
}

export interface Discovery {
  servers: DiscoveredServer[];
  staleFiles: string[];
  /** Directories or files that could not be read; discovery went on without them. */
  problems: string[];
}

/** A runtime file is a few hundred bytes; a huge one is not Jupyter's. */
const MAX_RUNTIME_FILE_BYTES = 64 * 1024;

export async function runtimeDirs(roots: Roots, users: Users): Promise<{ dirs: string[]; problems: string[] }> {
  const { homes, problems } = await listHomeDirs(roots, users);
  const candidates = homes.map((home) => path.join(home, ".local", "share", "jupyter", "runtime"));
  const userRunDir = under(roots.run, "user");
  try {
    for (const uid of await readdir(userRunDir)) candidates.push(path.join(userRunDir, uid, "jupyter"));
  } catch (error) {
    if (!isMissing(error)) problems.push(`${userRunDir}: ${errorMessage(error)}`);
  }
  const dirs = new Set<string>();
  for (const candidate of candidates) {
    try {
      dirs.add(await realpath(candidate));
    } catch (error) {
      if (!isMissing(error)) problems.push(`${candidate}: ${errorMessage(error)}`);
    }
  }
  return { dirs: [...dirs].sort(), problems };
}

export async function discoverServers(roots: Roots, users: Users): Promise<Discovery> {
  const { dirs, problems } = await runtimeDirs(roots, users);
  const servers: DiscoveredServer[] = [];
  const staleFiles: string[] = [];
  for (const dir of dirs) {
    let names: string[];
    try {
      names = (await readdir(dir)).filter(isRuntimeFileName).sort();
    } catch (error) {
      if (!isMissing(error)) problems.push(`${dir}: ${errorMessage(error)}`);
      continue;
    }
    for (const name of names) {
      const file = path.join(dir, name);
      const pidFromName = runtimeFilePid(name)!;
      let read: { text: string; uid: number };
      try {
        read = await readSmallFile(file);
      } catch (error) {
        if (!isMissing(error)) problems.push(`${file}: ${errorMessage(error)}`);
        continue;
      }
      let info: RuntimeInfo;
      try {
        info = parseRuntimeFile(read.text);
      } catch (error) {
        // A dead server's half-written file is stale like any other; a live one's is a problem.
        if (await processExists(roots, pidFromName)) problems.push(`${file}: ${errorMessage(error)}`);
        else staleFiles.push(file);
        continue;
      }
      const pid = info.pid ?? pidFromName;
      if (!(await processExists(roots, pid))) {
        staleFiles.push(file);
        continue;
      }
      servers.push({ runtimeFile: file, info, pid, uid: read.uid });
    }
  }
  return { servers, staleFiles, problems };
}

async function readSmallFile(file: string): Promise<{ text: string; uid: number }> {
  const handle = await open(file, "r");
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new Error("not a regular file");
    if (info.size > MAX_RUNTIME_FILE_BYTES) throw new Error(`${info.size} bytes: too large for a runtime file`);
    return { text: await handle.readFile("utf8"), uid: info.uid };
  } finally {
    await handle.close();
  }
}

async function processExists(roots: Roots, pid: number): Promise<boolean> {
  try {
    await stat(under(roots.proc, String(pid)));
    return true;
  } catch {
    return false;
  }
}
