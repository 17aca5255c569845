/**
 * Finds running Jupyter servers from the runtime files they write: jpserver-PID.json
 * (jupyter_server) and nbserver-PID.json (classic notebook 6), in every user's runtime dirs:
 *   ~/.local/share/jupyter/runtime      (jupyter_core's default)
 *   /run/user/UID/jupyter               ($XDG_RUNTIME_DIR/jupyter: older jupyter_core, platformdirs)
 * A file whose process is gone is stale (a crashed or killed server leaves it behind) and skipped.
 */
import { readdir } from "node:fs/promises";
import path from "node:path";
import {
  isMissingUserPath,
  MAX_ENTRIES_SCANNED,
  MAX_FILES_PER_DIRECTORY,
  UserPathError,
  type UserFile,
  type UserPathOptions,
} from "../fs/user-file.js";
import { UserPathCache } from "../fs/user-path-cache.js";
import { under, type Roots } from "../roots.js";
import type { Users } from "../users.js";
import { isMissing, processExists } from "../fs/exists.js";
import type { HomeSample } from "./home-scan.js";
import { byPath, listHomeDirs } from "./jupyter-homes.js";
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

/** A runtime directory found, with the names in it and how to reach them safely. */
export interface RuntimeDir {
  path: string;
  where: Pick<UserPathOptions, "trusted" | "segments">;
  names: string[];
  /** The runtime files in it, read in the same walk (or why each was refused). */
  files: Map<string, UserFile | UserPathError>;
}

/** A runtime file is a few hundred bytes; a huge one is not Jupyter's. */
const MAX_RUNTIME_FILE_BYTES = 64 * 1024;
const HOME_RUNTIME = [".local", "share", "jupyter", "runtime"];

/**
 * `scan`: the sample's homes and the cache of walks (home-scan.ts); without it the homes are
 * listed here and every directory is walked.
 */
export async function runtimeDirs(
  roots: Roots,
  users: Users,
  signal?: AbortSignal,
  scan?: HomeSample,
): Promise<{ dirs: RuntimeDir[]; problems: string[] }> {
  const {
    homes: listing,
    cache,
    nowMs,
  } = scan ?? {
    homes: await listHomeDirs(roots, users),
    cache: new UserPathCache(),
    nowMs: 0,
  };
  const { homes, problems } = listing;
  const candidates: Array<RuntimeDir["where"]> = homes.map((home) => ({
    trusted: home.trusted,
    segments: [home.name, ...HOME_RUNTIME],
  }));
  const userRunDir = under(roots.run, "user");
  try {
    for (const uid of (await readdir(userRunDir)).sort())
      candidates.push({ trusted: userRunDir, segments: [uid, "jupyter"] });
  } catch (error) {
    if (!isMissing(error)) problems.push(`${userRunDir}: ${errorMessage(error)}`);
  }
  const seen = new Set<string>();
  const dirs: RuntimeDir[] = [];
  for (const where of candidates) {
    try {
      const listing = await cache.listDir(
        {
          ...where,
          read: { names: isRuntimeFileName, maxBytes: MAX_RUNTIME_FILE_BYTES },
          ...(signal ? { signal } : {}),
        },
        nowMs,
      );
      if (listing === undefined) continue; // no runtime dir: the usual case
      if (listing instanceof UserPathError) {
        problems.push(listing.message);
        continue;
      }
      // The same directory reached twice (a home linked under two names) is read once.
      if (seen.has(listing.identity)) continue;
      seen.add(listing.identity);
      dirs.push({ path: listing.path, where, names: listing.names, files: listing.files ?? new Map() });
      if (listing.truncated)
        problems.push(
          `${listing.path}: more than ${MAX_ENTRIES_SCANNED} entries: only the first ${MAX_ENTRIES_SCANNED} were looked at`,
        );
      if (listing.skipped)
        problems.push(
          `${listing.path}: ${listing.skipped} more runtime files than the ${MAX_FILES_PER_DIRECTORY} read per directory: not read`,
        );
    } catch (error) {
      if (!isMissingUserPath(error)) problems.push(errorMessage(error));
    }
  }
  return { dirs: dirs.sort(byPath), problems };
}

export async function discoverServers(
  roots: Roots,
  users: Users,
  signal?: AbortSignal,
  scan?: HomeSample,
): Promise<Discovery> {
  const { dirs, problems } = await runtimeDirs(roots, users, signal, scan);
  const servers: DiscoveredServer[] = [];
  const staleFiles: string[] = [];
  for (const dir of dirs) {
    for (const name of dir.names.filter(isRuntimeFileName)) {
      const file = path.join(dir.path, name);
      const pidFromName = runtimeFilePid(name)!;
      const found = dir.files.get(name);
      if (found === undefined || found instanceof UserPathError) {
        if (found && !isMissingUserPath(found)) problems.push(found.message);
        continue;
      }
      const read = { text: found.data.toString("utf8"), uid: found.uid };
      let info: RuntimeInfo;
      try {
        info = parseRuntimeFile(read.text);
      } catch (error) {
        // A dead server's half-written file is stale like any other; a live one's is a problem.
        if (await processExists(roots.proc, pidFromName)) problems.push(`${file}: ${errorMessage(error)}`);
        else staleFiles.push(file);
        continue;
      }
      const pid = info.pid ?? pidFromName;
      if (!(await processExists(roots.proc, pid))) {
        staleFiles.push(file);
        continue;
      }
      servers.push({ runtimeFile: file, info, pid, uid: read.uid });
    }
  }
  return { servers, staleFiles, problems };
}
