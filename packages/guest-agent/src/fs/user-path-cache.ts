/**
 * The safe reader's walks (user-file.ts), remembered between samples: a walk below a home whose
 * directories did not change is not made again. Most homes on a shared machine never ran Jupyter
 * or code-server, and walking each of them every sample for each signal was most of the agent's
 * cost (docs/benchmarks.md, benchmark 1).
 *
 * What is remembered, per walk: the stamp (device, inode, mtime, ctime) of the deepest directory
 * the walk opened (the one an absent name is absent from, the one listed, the one a file is in),
 * and what the walk found: nothing (a component absent), the directory's names and the small
 * files read in it (each with its own stamp), or a file's identity. Next sample that directory's
 * path is lstat'ed: the same device and inode with the same mtime and ctime is the same directory
 * with the same entries (no entry is created, removed or renamed without its ctime changing, and
 * no owner can set a ctime), so the remembered answer is still what a walk would find there.
 * Whatever else changed above it, the path now reaches that same directory, or the stamps would
 * differ. Files read are checked the same way, size included; a heartbeat is lstat'ed each sample
 * for its fresh mtime. One lstat per home and sample, shared by both signals, instead of a walk
 * per signal: the walk's opens and fstats cost 10-40 µs each through libuv's pool.
 *
 * What is never remembered: a refusal (a link, a FIFO, a wrong owner, too large, unreadable):
 * those walks are made again every sample, so their problems are reported as before; a walk whose
 * stamps are younger than RACY_MS at the sample's time (a change in the same clock tick as the
 * walk would leave the ctime as it was); a file larger than MAX_REMEMBERED_FILE_BYTES.
 *
 * docs/security.md ("The mtime cache") has what this lets a hostile user do: nothing the walk
 * would refuse, at most keep the agent one sample behind about their own files.
 */
import type { Stats } from "node:fs";
import { lstat, stat } from "node:fs";
import path from "node:path";
import {
  type DirStamp,
  inUserPathLane,
  listUserDir,
  statUserFile,
  type UserDirListing,
  type UserFile,
  type UserFileStat,
  UserPathError,
  type UserPathOptions,
} from "./user-file.js";

/** A walk's answer: the value, a refusal (its error, returned, not thrown), or undefined: simply absent. */
export type WalkResult<T> = T | UserPathError | undefined;

/** Stamps at least this much older than the sample may be trusted: kernels keep timestamps in coarse ticks. */
export const RACY_MS = 2_000;
/** Runtime files are a few hundred bytes; larger ones are read again each sample rather than held. */
export const MAX_REMEMBERED_FILE_BYTES = 8 * 1024;
/** Walks remembered at most (three per home: a machine of thousands of homes stays bounded). */
export const MAX_REMEMBERED_WALKS = 8_192;

type ListOptions = UserPathOptions & {
  read?: { names: (name: string) => boolean; maxBytes: number; maxFiles?: number };
};

type Found =
  | { kind: "absent" }
  | { kind: "listing"; listing: UserDirListing; files: UserFile[] }
  | { kind: "file"; file: UserFileStat };

interface Walk {
  /** The deepest directory the walk opened. */
  stamp: DirStamp;
  found: Found;
  /** The sample that last asked for it. */
  sample: number;
}

export interface UserPathCacheCounts {
  /** Walks made (nothing remembered, or something changed). */
  walked: number;
  /** Answers given from memory after the stamps matched. */
  remembered: number;
}

export class UserPathCache {
  private walks = new Map<string, Walk>();
  private sample = 0;
  /** lstat/stat of one path, once per sample whichever walk asks (a home's .local is on several). */
  private looked = new Map<string, Promise<Stats | undefined>>();
  readonly counts: UserPathCacheCounts = { walked: 0, remembered: 0 };

  /** A new sample: checks are made afresh, and walks the last sample did not ask for are forgotten. */
  beginSample(): void {
    for (const [key, walk] of this.walks) if (walk.sample < this.sample) this.walks.delete(key);
    this.sample++;
    this.looked = new Map();
  }

  get size(): number {
    return this.walks.size;
  }

  /** listUserDir, remembered. */
  async listDir(options: ListOptions, nowMs: number): Promise<WalkResult<UserDirListing>> {
    const key = keyOf("dir", options);
    const known = this.walks.get(key);
    if (known !== undefined && (await this.stillHolds(known, options))) {
      known.sample = this.sample;
      this.counts.remembered++;
      return known.found.kind === "listing" ? known.found.listing : undefined;
    }
    this.walks.delete(key);
    this.counts.walked++;
    const stamps: DirStamp[] = [];
    try {
      const listing = await listUserDir({ ...options, stamps });
      const files: UserFile[] = [];
      let rememberable = true;
      for (const file of listing.files?.values() ?? []) {
        if (file instanceof UserPathError || file.size > MAX_REMEMBERED_FILE_BYTES) rememberable = false;
        else files.push(file);
      }
      if (options.signal?.aborted) rememberable = false; // the deadline cut the reads short
      if (rememberable) this.remember(key, stamps, { kind: "listing", listing, files }, nowMs, files);
      return listing;
    } catch (error) {
      return this.refusedOrAbsent(key, stamps, error, nowMs);
    }
  }

  /** statUserFile, remembered: the file's identity is; its times and size are read fresh each sample. */
  async statFile(options: UserPathOptions, nowMs: number): Promise<WalkResult<UserFileStat>> {
    const key = keyOf("file", options);
    const known = this.walks.get(key);
    if (known !== undefined && (await this.stillHolds(known, options))) {
      if (known.found.kind === "absent") {
        known.sample = this.sample;
        this.counts.remembered++;
        return undefined;
      }
      if (known.found.kind === "file") {
        const fresh = await this.sameFile(known.found.file, options.signal);
        if (fresh !== undefined) {
          known.sample = this.sample;
          this.counts.remembered++;
          return fresh;
        }
      }
    }
    this.walks.delete(key);
    this.counts.walked++;
    const stamps: DirStamp[] = [];
    try {
      const file = await statUserFile({ ...options, stamps });
      this.remember(key, stamps, { kind: "file", file }, nowMs, []);
      return file;
    } catch (error) {
      return this.refusedOrAbsent(key, stamps, error, nowMs);
    }
  }

  private refusedOrAbsent(key: string, stamps: DirStamp[], error: unknown, nowMs: number): UserPathError | undefined {
    if (!(error instanceof UserPathError)) throw error;
    if (error.problem !== "missing") return error;
    this.remember(key, stamps, { kind: "absent" }, nowMs, []);
    return undefined;
  }

  private remember(key: string, stamps: DirStamp[], found: Found, nowMs: number, files: UserFile[]): void {
    const stamp = stamps.at(-1);
    if (stamp === undefined || this.walks.size >= MAX_REMEMBERED_WALKS) return;
    const settled = nowMs - RACY_MS;
    if (stamp.ctimeMs > settled || files.some((file) => file.ctimeMs > settled)) return;
    this.walks.set(key, { stamp, found, sample: this.sample });
  }

  /** The walk's deepest directory is as it was, and every file read in it. In one lane, one call at a time. */
  private stillHolds(walk: Walk, options: UserPathOptions): Promise<boolean> {
    return inUserPathLane(
      () => path.join(options.trusted, ...options.segments),
      options.signal,
      async () => {
        const { stamp } = walk;
        const now = await this.look(stamp.path, stamp.followed);
        if (
          now === undefined ||
          !now.isDirectory() ||
          now.dev !== stamp.dev ||
          now.ino !== stamp.ino ||
          now.mtimeMs !== stamp.mtimeMs ||
          now.ctimeMs !== stamp.ctimeMs
        )
          return false;
        if (walk.found.kind !== "listing") return true;
        for (const file of walk.found.files) {
          const now = await this.look(file.path, false);
          if (
            now === undefined ||
            !now.isFile() ||
            now.dev !== file.dev ||
            now.ino !== file.ino ||
            now.size !== file.size ||
            now.mtimeMs !== file.mtimeMs ||
            now.ctimeMs !== file.ctimeMs
          )
            return false;
        }
        return true;
      },
    ).catch(() => false);
  }

  /** The file the walk found, if its name still names it (a regular file, same inode, same owner): its fresh stat. */
  private async sameFile(file: UserFileStat, signal: AbortSignal | undefined): Promise<UserFileStat | undefined> {
    const now = await inUserPathLane(file.path, signal, () => lookUp(file.path, false)).catch(() => undefined);
    if (now === undefined || !now.isFile() || now.dev !== file.dev || now.ino !== file.ino || now.uid !== file.uid)
      return undefined;
    return {
      path: file.path,
      uid: now.uid,
      size: now.size,
      mtimeMs: now.mtimeMs,
      atimeMs: now.atimeMs,
      ctimeMs: now.ctimeMs,
      dev: now.dev,
      ino: now.ino,
    };
  }

  private look(at: string, follow: boolean): Promise<Stats | undefined> {
    const key = `${follow ? "stat" : "lstat"}:${at}`;
    let found = this.looked.get(key);
    if (found === undefined) {
      found = lookUp(at, follow);
      this.looked.set(key, found);
    }
    return found;
  }
}

/**
 * lstat (stat for a directory reached through root's link) that answers undefined for any
 * failure: an absent path is the ordinary case here and costs no exception.
 */
function lookUp(at: string, follow: boolean): Promise<Stats | undefined> {
  return new Promise((resolve) => {
    (follow ? stat : lstat)(at, (error, info) => resolve(error ? undefined : info));
  });
}

/** One walk per kind, path and read limits; each caller reads one kind of file per path (its own name filter). */
function keyOf(kind: "dir" | "file", options: ListOptions): string {
  const read = "read" in options && options.read ? `${options.read.maxBytes}:${options.read.maxFiles ?? ""}` : "";
  return [kind, options.owners ?? "user", read, options.trusted, ...options.segments].join("\0");
}
