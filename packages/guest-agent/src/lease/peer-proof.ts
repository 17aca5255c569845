// Who is on the other end of the lease socket, as the kernel says it.
//
// Node cannot read SO_PEERCRED, and the agent ships without native addons. So
// the caller proves its uid by creating a file: the server sends a random
// nonce and a random file name; the client creates that file exclusively in a
// root-owned sticky directory (mode 1733, like /tmp but not listable) with the
// nonce as its content; the server opens it without following links, checks
// it, takes the file's owner as the caller's uid, and deletes it.
//
// Why this is sound (see docs/leases.md for the long form):
// - st_uid of a new file is set by the kernel to the creating process's
//   filesystem uid; only root (CAP_CHOWN) can change it. A request's own
//   claim about its uid is never read.
// - The nonce and the name are 128 random bits per connection: no file made
//   beforehand can match, and nobody can list the directory to learn a name.
// - The sticky bit stops anyone from removing or renaming another user's file.
// - A hard link to someone else's file fails the checks: nlink must be 1, the
//   mode must be exactly 0600 (only the owner can chmod, and a 0600 file of
//   someone else cannot be written to put the nonce in), and
//   fs.protected_hardlinks (on by default) refuses the link in the first place.
// - O_NOFOLLOW and fstat on the opened descriptor: a symlink is refused, and
//   what is checked is the very file that was read (no check-then-use race).
// - O_NONBLOCK: a FIFO planted under the name cannot hang the server.
import { randomBytes, timingSafeEqual } from "node:crypto";
import { constants } from "node:fs";
import { chmod, lstat, mkdir, open, readdir, rmdir, unlink } from "node:fs/promises";
import path from "node:path";
import { errorMessage } from "@ws/protocol";

export const PROOF_DIR_NAME = "proof";
export const PROOF_DIR_MODE = 0o1733;
const PROOF_FILE_MODE = 0o600;
const MAX_PROOF_BYTES = 256;

export interface ProofChallenge {
  nonce: string;
  /** File name inside the proof directory. */
  name: string;
}

/** The proof directory belongs next to the socket: clients derive it from the socket path they connected to. */
export function proofDirFor(socketPath: string): string {
  return path.join(path.dirname(socketPath), PROOF_DIR_NAME);
}

/**
 * Root's own socket beside the public one (agent.sock → agent-root.sock): mode 0600, so the kernel
 * admits root alone and root is never locked out. Named after the public socket, so two agents
 * whose sockets share a directory (tests, a host running several) each keep their own.
 */
export function rootSocketFor(socketPath: string): string {
  return path.join(path.dirname(socketPath), `${path.basename(socketPath).replace(/\.sock$/, "")}-root.sock`);
}

export function newProofChallenge(): ProofChallenge {
  return { nonce: randomBytes(16).toString("hex"), name: randomBytes(16).toString("hex") };
}

export function isProofName(name: string): boolean {
  return /^[0-9a-f]{32}$/.test(name);
}

/**
 * Creates (or repairs) the proof directory: owned by the agent's uid, mode
 * 1733. Refuses a symlink or a directory someone else owns, since then the
 * sticky-bit guarantees belong to them. Returns what the cleanup left behind.
 */
export async function prepareProofDir(dir: string, ownUid: number): Promise<string[]> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const info = await lstat(dir);
  if (!info.isDirectory()) throw new Error(`${dir} is not a directory`);
  if (info.uid !== ownUid)
    throw new Error(`${dir} is owned by uid ${info.uid}, not by the agent (uid ${ownUid}); remove it`);
  if ((info.mode & 0o7777) !== PROOF_DIR_MODE) await chmod(dir, PROOF_DIR_MODE);
  return cleanProofDir(dir);
}

/**
 * No connection is in flight at start-up: whatever is in the directory was left by clients of an
 * earlier run, or put there to fill it. Every user can write here, so nothing is removed
 * recursively and nothing is followed: each entry directly inside is lstat'ed, a non-directory
 * is unlinked (unlink removes a link itself, never its target), an empty directory is rmdir'ed
 * (rmdir of a link fails), and anything else is left and named. A directory swapped for a link
 * between the lstat and the removal makes the call fail; it cannot lead outside.
 */
export async function cleanProofDir(dir: string): Promise<string[]> {
  const left: string[] = [];
  for (const name of await readdir(dir)) {
    const entry = path.join(dir, name);
    try {
      const info = await lstat(entry);
      if (info.isDirectory()) await rmdir(entry);
      else await unlink(entry);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // The name is a user's choice: quoted, so a newline or an escape in it cannot forge a log line.
      if (code !== "ENOENT") left.push(`${JSON.stringify(entry)} (${code ?? "error"})`);
    }
  }
  return left;
}

export type ProofResult = { ok: true; uid: number } | { ok: false; reason: string };

/** Checks the proof file for `challenge` and removes it. The uid comes from the file's owner. */
export async function verifyProof(dir: string, challenge: ProofChallenge): Promise<ProofResult> {
  const file = path.join(dir, challenge.name);
  let handle;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return { ok: false, reason: "the proof file was not created" };
    if (code === "ELOOP") {
      await unlink(file).catch(() => undefined);
      return { ok: false, reason: "the proof file is a symbolic link" };
    }
    return { ok: false, reason: `cannot open the proof file (${code ?? errorMessage(error)})` };
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) return { ok: false, reason: "the proof file is not a regular file" };
    if (info.nlink !== 1) return { ok: false, reason: "the proof file has other hard links" };
    if ((info.mode & 0o7777) !== PROOF_FILE_MODE)
      return { ok: false, reason: `the proof file's mode is ${(info.mode & 0o7777).toString(8)}, not 600` };
    if (info.size > MAX_PROOF_BYTES) return { ok: false, reason: "the proof file is too large" };
    const buffer = Buffer.alloc(MAX_PROOF_BYTES);
    const { bytesRead } = await handle.read(buffer, 0, MAX_PROOF_BYTES, 0);
    const content = buffer.subarray(0, bytesRead);
    const expected = Buffer.from(challenge.nonce, "utf8");
    if (content.length !== expected.length || !timingSafeEqual(content, expected)) {
      return { ok: false, reason: "the proof file does not hold this connection's nonce" };
    }
    return { ok: true, uid: info.uid };
  } finally {
    await handle.close();
    await unlink(file).catch(() => undefined);
  }
}

/** Removes a proof file left behind by a client that went away; harmless when there is none. */
export async function discardProof(dir: string, challenge: ProofChallenge): Promise<void> {
  await unlink(path.join(dir, challenge.name)).catch(() => undefined);
}

/** Client side: creates the proof file the server asked for. Fails rather than overwrite anything. */
export async function writeProof(dir: string, name: string, nonce: string): Promise<void> {
  if (!isProofName(name)) throw new Error("the agent sent an invalid proof file name");
  const handle = await open(
    path.join(dir, name),
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    PROOF_FILE_MODE,
  );
  try {
    await handle.chmod(PROOF_FILE_MODE); // an unusual umask must not make the proof fail
    await handle.writeFile(nonce, "utf8");
  } finally {
    await handle.close();
  }
}
