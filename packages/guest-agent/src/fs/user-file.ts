/**
 * The one way the agent (root) reads a path that an unprivileged user controls: a Jupyter
 * runtime file, a code-server heartbeat, anything under a home or /run/user/UID.
 *
 * The rules (docs/security.md has why):
 * - The walk starts at a trusted directory (root's: /home, /run/user, the parent of a passwd
 *   home) and opens every component below it with O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
 *   relative to the descriptor of the one before (through /proc/self/fd, Node has no openat):
 *   no symbolic link is followed, and a directory swapped during the walk cannot redirect it.
 *   The one exception: a home itself may be a link that root made (an admin's /home → /data
 *   layout); a user's own link is refused.
 * - The first directory below the trusted one names the user (its owner); every directory
 *   after it and the file must be owned by that user or by root. Anything else is skipped.
 * - O_CLOEXEC is not in Node's constants: libuv adds it to every open() it makes, so no
 *   descriptor leaks into a child process (nvidia-smi, systemd-inhibit).
 * - O_NONBLOCK: a FIFO or a device planted under the name opens at once and is refused by
 *   fstat (not a regular file) instead of holding a thread forever.
 * - fstat of the opened descriptor decides (no check-then-use race); at most maxBytes are read.
 * - Errors name the path and the kind of problem, never a byte of content.
 * - At most LANES walks are in flight at once, so a path that hangs anyway (a dead network
 *   filesystem) can hold at most that many of libuv's four pool threads: the lease socket, the
 *   state dir and every other source keep the rest. A walk waiting for a lane gives up when its
 *   AbortSignal fires (the sampler's per-source deadline).
 */
import { constants, type Stats } from "node:fs";
import { lstat, open, opendir, type FileHandle } from "node:fs/promises";
import path from "node:path";

export type UserPathProblem =
  /** Some component does not exist (the normal case when scanning every home). */
  | "missing"
  /** A component is a symbolic link the agent will not follow. */
  | "symlink"
  /** A component that should be a directory is not one. */
  | "not-directory"
  /** The file is a FIFO, socket, device or directory. */
  | "not-regular"
  /** A component is owned by someone other than the user or root. */
  | "wrong-owner"
  /** Larger than the reader's cap. */
  | "too-large"
  /** The walk was given up: its deadline passed while it waited for a free lane. */
  | "timed-out"
  /** Any other failure of the system call (EACCES, EIO, ...). */
  | "unreadable";

/** Says which path failed and why; carries no file content by construction. */
export class UserPathError extends Error {
  override name = "UserPathError";
  constructor(
    readonly path: string,
    readonly problem: UserPathProblem,
    detail: string,
  ) {
    super(`${path}: ${detail}`);
  }
}

export interface UserPathOptions {
  /** A directory root controls: the walk starts here and it is opened as is. */
  trusted: string;
  /** Path components below `trusted`, the first being the user's directory (a home, /run/user/UID). */
  segments: readonly string[];
  /**
   * Who may own what is below `trusted`: "user" (default) takes the first component's owner as the
   * user and accepts that uid or root; "root" accepts only root (logind's /run/systemd files).
   */
  owners?: "user" | "root";
  /** Abort waiting for a lane (the walk itself, once started, is non-blocking by construction). */
  signal?: AbortSignal;
  /**
   * Filled with what the walk saw of each directory it opened below `trusted`, also when it
   * fails: what a cache (user-path-cache.ts) checks later to know nothing there changed.
   */
  stamps?: DirStamp[];
}

/**
 * One directory as a walk found it. A directory's entries cannot change without its ctime
 * changing (creating, removing or renaming an entry sets mtime and ctime), and ctime cannot be
 * set by its owner (utimes sets ctime to now), so the same device, inode, mtime and ctime mean
 * the same names naming the same inodes.
 */
export interface DirStamp {
  /** trusted/segments…, the directory's path. */
  path: string;
  /** The home itself reached through root's link (see openDirectory): checked with stat, not lstat. */
  followed: boolean;
  dev: number;
  ino: number;
  mtimeMs: number;
  ctimeMs: number;
}

export interface UserFileStat {
  /** The path as given (trusted/segments…), for messages and reports. */
  path: string;
  uid: number;
  size: number;
  mtimeMs: number;
  atimeMs: number;
  /** With dev, ino, size and mtime: whether the file is still the one read (user-path-cache.ts). */
  ctimeMs: number;
  dev: number;
  ino: number;
}

export interface UserDirListing {
  path: string;
  /** The user the directory belongs to (the first component's owner). */
  uid: number;
  /** device:inode, to notice one directory reached twice (a home linked under two names). */
  identity: string;
  names: string[];
  /** With `read`: each selected name's content, or why it was refused. */
  files?: Map<string, UserFile | UserPathError>;
  /** With `read`: selected names beyond maxFiles, not read. */
  skipped?: number;
  /** The directory holds more than MAX_ENTRIES_SCANNED entries: only that many were looked at. */
  truncated?: boolean;
}

export interface UserFile extends UserFileStat {
  data: Buffer;
}

/** Entries looked at in one directory: a user's directory of a million files costs no more than this. */
export const MAX_ENTRIES_SCANNED = 4096;

/** Files read from one directory in one walk, unless the caller says otherwise. */
export const MAX_FILES_PER_DIRECTORY = 64;

const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;
const DIRECTORY_FLAGS = OPEN_FLAGS | constants.O_DIRECTORY;

/** Reads a regular file a user controls, at most maxBytes of it (larger files are refused, not truncated). */
export async function readUserFile(options: UserPathOptions & { maxBytes: number }): Promise<UserFile> {
  return inLane(options, async () => {
    const { segments } = options;
    if (segments.length < 2)
      throw new Error("a user file needs a user directory and a name below the trusted directory");
    const parent = await openDirectories(options, segments.length - 1);
    try {
      return await readLeaf(parent, segments[segments.length - 1]!, options, options.maxBytes);
    } finally {
      await parent.handle.close().catch(() => undefined);
    }
  });
}

/** Opens `name` in the open directory, checks it, reads it whole (at most maxBytes, else refused). */
async function readLeaf(
  parent: OpenDirectory,
  name: string,
  options: UserPathOptions,
  maxBytes: number,
): Promise<UserFile> {
  const { handle, info, file } = await openFileIn(parent, name, options);
  try {
    if (info.size > maxBytes)
      throw new UserPathError(
        file,
        "too-large",
        `${info.size} bytes, more than the ${maxBytes} a file of this kind may have`,
      );
    const data = Buffer.alloc(Math.max(0, info.size));
    let filled = 0;
    // The file may grow after fstat: read no more than the size checked, so the cap holds.
    while (filled < data.length) {
      const { bytesRead } = await handle.read(data, filled, data.length - filled, filled).catch((error: unknown) => {
        throw asUserPathError(file, error);
      });
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    return { ...statOf(file, info), data: data.subarray(0, filled) };
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** fstat of a regular file a user controls, opened the same safe way (nothing is read). */
export async function statUserFile(options: UserPathOptions): Promise<UserFileStat> {
  return inLane(options, async () => {
    const { handle, info, file } = await openLeaf(options);
    await handle.close().catch(() => undefined);
    return statOf(file, info);
  });
}

/**
 * Names in a directory a user controls (the directory and each one above it checked like a
 * file's). With `read`, the regular files whose names it selects are read in the same walk,
 * relative to the directory's descriptor: one walk for a runtime dir and its files.
 */
export async function listUserDir(
  options: UserPathOptions & { read?: { names: (name: string) => boolean; maxBytes: number; maxFiles?: number } },
): Promise<UserDirListing> {
  return inLane(options, async () => {
    const { handle, uid, dir } = await openDirectories(options, options.segments.length);
    try {
      const info = await handle.stat();
      const { names, complete } = await readNames(fdPath(handle), MAX_ENTRIES_SCANNED).catch((error: unknown) => {
        throw asUserPathError(dir, error);
      });
      names.sort();
      const listing: UserDirListing = { path: dir, uid, identity: `${info.dev}:${info.ino}`, names };
      if (!complete) listing.truncated = true;
      if (options.read) {
        const { names: wanted, maxBytes, maxFiles = MAX_FILES_PER_DIRECTORY } = options.read;
        listing.files = new Map();
        const selected = names.filter(wanted);
        // A user may plant thousands of matching names: the work per sample stays bounded.
        if (selected.length > maxFiles) listing.skipped = selected.length - maxFiles;
        for (const name of selected.slice(0, maxFiles)) {
          if (options.signal?.aborted) break; // the source's deadline passed: nobody waits for the rest
          listing.files.set(
            name,
            await readLeaf({ handle, uid, dir }, name, options, maxBytes).catch((error: unknown) =>
              asUserPathError(path.join(dir, name), error),
            ),
          );
        }
      }
      return listing;
    } finally {
      await handle.close().catch(() => undefined);
    }
  });
}

/** Up to `limit` names, streamed (readdir would hold them all in memory at once). */
async function readNames(dir: string, limit: number): Promise<{ names: string[]; complete: boolean }> {
  const names: string[] = [];
  const handle = await opendir(dir, { bufferSize: 128 });
  try {
    for (let entry = await handle.read(); entry !== null; entry = await handle.read()) {
      if (names.length >= limit) return { names, complete: false };
      names.push(entry.name);
    }
    return { names, complete: true };
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** A missing file or directory is the ordinary case when scanning homes: not worth a message. */
export function isMissingUserPath(error: unknown): boolean {
  return error instanceof UserPathError && error.problem === "missing";
}

function statOf(file: string, info: Stats): UserFileStat {
  return {
    path: file,
    uid: info.uid,
    size: info.size,
    mtimeMs: info.mtimeMs,
    atimeMs: info.atimeMs,
    ctimeMs: info.ctimeMs,
    dev: info.dev,
    ino: info.ino,
  };
}

interface OpenDirectory {
  handle: FileHandle;
  /** The user the walk belongs to. */
  uid: number;
  /** Its path, for messages. */
  dir: string;
}

async function openLeaf(options: UserPathOptions): Promise<{ handle: FileHandle; info: Stats; file: string }> {
  const { segments } = options;
  if (segments.length < 2) throw new Error("a user file needs a user directory and a name below the trusted directory");
  const parent = await openDirectories(options, segments.length - 1);
  try {
    return await openFileIn(parent, segments[segments.length - 1]!, options);
  } finally {
    await parent.handle.close().catch(() => undefined);
  }
}

async function openFileIn(
  parent: OpenDirectory,
  name: string,
  options: UserPathOptions,
): Promise<{ handle: FileHandle; info: Stats; file: string }> {
  const file = path.join(parent.dir, name);
  let handle: FileHandle;
  try {
    handle = await open(path.join(fdPath(parent.handle), name), OPEN_FLAGS);
  } catch (error) {
    throw asUserPathError(file, error);
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new UserPathError(file, "not-regular", `${kindOf(info)}, not a regular file: ignored`);
    checkOwner(file, info.uid, parent.uid, options);
    return { handle, info, file };
  } catch (error) {
    await handle.close().catch(() => undefined);
    throw error;
  }
}

/** Opens trusted/segments[0..count) as directories; returns the last one's handle and the user's uid. */
async function openDirectories(options: UserPathOptions, count: number): Promise<OpenDirectory> {
  let dir = options.trusted;
  let handle: FileHandle;
  try {
    handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NONBLOCK);
  } catch (error) {
    throw asUserPathError(dir, error);
  }
  let uid = 0;
  try {
    // The trusted directory too: a home that is absent stays absent while its parent is unchanged.
    if (options.stamps) {
      const trusted = await handle.stat().catch((error: unknown) => {
        throw asUserPathError(dir, error);
      });
      options.stamps.push(stampOf(dir, true, trusted));
    }
    for (let index = 0; index < count; index++) {
      const name = options.segments[index]!;
      if (name === "" || name === "." || name === ".." || name.includes("/"))
        throw new Error(`bad path component ${JSON.stringify(name)}`);
      const next = path.join(dir, name);
      const opened = await openDirectory(handle, name, next, index === 0);
      await handle.close().catch(() => undefined);
      handle = opened.handle;
      options.stamps?.push(stampOf(next, opened.followed, opened.info));
      if (index === 0) uid = options.owners === "root" ? 0 : opened.info.uid;
      checkOwner(next, opened.info.uid, uid, options);
      dir = next;
    }
    return { handle, uid, dir };
  } catch (error) {
    await handle.close().catch(() => undefined);
    throw error;
  }
}

async function openDirectory(
  parent: FileHandle,
  name: string,
  shown: string,
  mayBeRootLink: boolean,
): Promise<{ handle: FileHandle; info: Stats; followed: boolean }> {
  const inParent = path.join(fdPath(parent), name);
  let handle: FileHandle;
  let followed = false;
  try {
    handle = await open(inParent, DIRECTORY_FLAGS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // O_NOFOLLOW | O_DIRECTORY on a link fails with ENOTDIR, not ELOOP: lstat says which it was.
    if (code !== "ELOOP" && code !== "ENOTDIR") throw asUserPathError(shown, error);
    const link = await lstat(inParent).catch((cause: unknown) => {
      throw asUserPathError(shown, cause);
    });
    if (!link.isSymbolicLink())
      throw new UserPathError(shown, "not-directory", `${kindOf(link)}, not a directory: ignored`);
    if (!mayBeRootLink) throw new UserPathError(shown, "symlink", "a symbolic link: not followed");
    // A home that is a symbolic link: followed only when root made the link (its parent is root's).
    if (link.uid !== 0)
      throw new UserPathError(shown, "symlink", `a symbolic link owned by uid ${link.uid}, not root: not followed`);
    try {
      handle = await open(inParent, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NONBLOCK);
      followed = true;
    } catch (cause) {
      throw asUserPathError(shown, cause);
    }
  }
  try {
    return { handle, info: await handle.stat(), followed };
  } catch (error) {
    await handle.close().catch(() => undefined);
    throw asUserPathError(shown, error);
  }
}

function stampOf(dir: string, followed: boolean, info: Stats): DirStamp {
  return { path: dir, followed, dev: info.dev, ino: info.ino, mtimeMs: info.mtimeMs, ctimeMs: info.ctimeMs };
}

function checkOwner(shown: string, owner: number, userUid: number, options: UserPathOptions): void {
  if (owner === 0 || (options.owners !== "root" && owner === userUid)) return;
  const allowed = options.owners === "root" || userUid === 0 ? "root" : `uid ${userUid} or root`;
  throw new UserPathError(shown, "wrong-owner", `owned by uid ${owner}, not ${allowed}: ignored`);
}

/** The descriptor as a path, so the next open resolves relative to exactly this directory. */
function fdPath(handle: FileHandle): string {
  return `/proc/self/fd/${handle.fd}`;
}

function kindOf(info: Stats): string {
  if (info.isFIFO()) return "a FIFO";
  if (info.isSocket()) return "a socket";
  if (info.isCharacterDevice() || info.isBlockDevice()) return "a device";
  if (info.isDirectory()) return "a directory";
  if (info.isSymbolicLink()) return "a symbolic link";
  return info.isFile() ? "a regular file" : "an unknown kind of file";
}

function asUserPathError(shown: string, error: unknown): UserPathError {
  if (error instanceof UserPathError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case "ENOENT":
      return new UserPathError(shown, "missing", "does not exist");
    case "ELOOP":
      return new UserPathError(shown, "symlink", "a symbolic link: not followed");
    case "ENOTDIR":
      return new UserPathError(shown, "not-directory", "not a directory: ignored");
    default:
      // Only the code: a message from a failed call never holds content, but keep it to the code anyway.
      return new UserPathError(shown, "unreadable", `cannot be read (${code ?? "error"})`);
  }
}

// ---- lanes: bound the pool threads user paths can hold ----

/**
 * At most `size` pieces of work at once; the rest wait in order. A waiter whose AbortSignal fires
 * leaves the queue with a "timed-out" UserPathError, so a stuck lane never makes callers pile up.
 */
export class Lanes {
  private busy = 0;
  private readonly waiting: Array<() => void> = [];
  /** Work that started and has not finished, with its start time: a stuck one shows here. */
  private readonly inFlight = new Map<number, number>();
  private nextId = 0;

  constructor(readonly size: number) {}

  /** `shown`: the path for the timed-out error; a function, so the common case builds no string. */
  async run<T>(shown: string | (() => string), signal: AbortSignal | undefined, work: () => Promise<T>): Promise<T> {
    if (this.busy >= this.size) await this.waitForLane(shown, signal);
    else this.busy++;
    const id = this.nextId++;
    this.inFlight.set(id, performance.now());
    try {
      return await work();
    } finally {
      this.inFlight.delete(id);
      const next = this.waiting.shift();
      if (next) next();
      else this.busy--;
    }
  }

  /** Work running longer than olderThanMs. */
  stuck(olderThanMs: number, nowMs = performance.now()): number {
    let count = 0;
    for (const started of this.inFlight.values()) if (nowMs - started > olderThanMs) count++;
    return count;
  }

  private waitForLane(shown: string | (() => string), signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        const index = this.waiting.indexOf(grant);
        if (index >= 0) this.waiting.splice(index, 1);
        reject(
          new UserPathError(
            typeof shown === "string" ? shown : shown(),
            "timed-out",
            "gave up: other reads of user files are stuck (a hanging filesystem?)",
          ),
        );
      };
      const grant = (): void => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(grant);
    });
  }
}

/** How many walks may be in flight; libuv has 4 pool threads and these must never take them all. */
export const LANES = 2;
const lanes = new Lanes(LANES);

function inLane<T>(options: UserPathOptions, work: () => Promise<T>): Promise<T> {
  return lanes.run(() => path.join(options.trusted, ...options.segments), options.signal, work);
}

/** Other work on user paths (user-path-cache.ts's checks) in the same lanes as the walks. */
export function inUserPathLane<T>(
  shown: string | (() => string),
  signal: AbortSignal | undefined,
  work: () => Promise<T>,
): Promise<T> {
  return lanes.run(shown, signal, work);
}

/** Walks running longer than olderThanMs: a filesystem that hangs (shutdown uses it to decide how to exit). */
export function stuckUserPathReads(olderThanMs: number): number {
  return lanes.stuck(olderThanMs);
}
