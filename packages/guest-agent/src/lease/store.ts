// leases.json in the agent's state dir: the leases and the last known cap, so
// both survive an agent restart. Parsing is pure and strict; a file that does
// not parse is moved aside (kept as evidence) and the agent goes on with none.
import { readFile, rename } from "node:fs/promises";
import path from "node:path";
import { writeFileAtomic } from "../fs/atomic-write.js";
import type { StoredLease } from "./leases.js";
import { errorMessage, isJsonObject } from "@ws/protocol";

export const LEASE_FILE = "leases.json";
const FORMAT_VERSION = 1;

export interface LeaseState {
  leases: StoredLease[];
  /** max-keep-running from the last policy a collector sent, if any. */
  maxKeepRunningSeconds?: number;
}

export type ParseResult = { ok: true; state: LeaseState } | { ok: false; error: string };

export function serializeLeaseState(state: LeaseState): string {
  const document: Record<string, unknown> = { version: FORMAT_VERSION, leases: state.leases };
  if (state.maxKeepRunningSeconds !== undefined) document.maxKeepRunningSeconds = state.maxKeepRunningSeconds;
  return `${JSON.stringify(document, null, 2)}\n`;
}

export function parseLeaseState(text: string): ParseResult {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: `not JSON (${errorMessage(error)})` };
  }
  if (!isJsonObject(document)) return { ok: false, error: "not a JSON object" };
  if (document.version !== FORMAT_VERSION)
    return { ok: false, error: `unknown format version ${JSON.stringify(document.version)}` };
  if (!Array.isArray(document.leases)) return { ok: false, error: `"leases" is not a list` };
  const leases: StoredLease[] = [];
  for (const [index, entry] of document.leases.entries()) {
    const lease = parseStoredLease(entry);
    if (typeof lease === "string") return { ok: false, error: `lease #${index + 1}: ${lease}` };
    leases.push(lease);
  }
  const state: LeaseState = { leases };
  const cap = document.maxKeepRunningSeconds;
  if (cap !== undefined) {
    if (!isPositive(cap)) return { ok: false, error: `"maxKeepRunningSeconds" is not a positive number` };
    state.maxKeepRunningSeconds = cap;
  }
  return { ok: true, state };
}

function parseStoredLease(entry: unknown): StoredLease | string {
  if (!isJsonObject(entry)) return "not an object";
  const { id, uid, user, reason, requestedSeconds, holdSeconds, takenAtMs, confirmed, clamped, refused } = entry;
  if (typeof id !== "string" || !/^[0-9a-f]{8}$/.test(id)) return `bad id ${JSON.stringify(id)}`;
  if (typeof uid !== "number" || !Number.isInteger(uid) || uid < 0 || uid > 0xffffffff) return "bad uid";
  if (typeof user !== "string") return "bad user";
  if (typeof reason !== "string") return "bad reason";
  if (!isPositive(requestedSeconds)) return "bad requestedSeconds";
  if (typeof holdSeconds !== "number" || !Number.isFinite(holdSeconds) || holdSeconds < 0) return "bad holdSeconds";
  if (typeof takenAtMs !== "number" || !Number.isFinite(takenAtMs)) return "bad takenAtMs";
  if (typeof confirmed !== "boolean" || typeof clamped !== "boolean" || typeof refused !== "boolean")
    return "bad flags";
  const lease: StoredLease = {
    id,
    uid,
    user,
    reason,
    requestedSeconds,
    holdSeconds,
    takenAtMs,
    confirmed,
    clamped,
    refused,
  };
  if (entry.maxKeepRunningSeconds !== undefined) {
    if (!isPositive(entry.maxKeepRunningSeconds)) return "bad maxKeepRunningSeconds";
    lease.maxKeepRunningSeconds = entry.maxKeepRunningSeconds;
  }
  if (entry.collectorMessage !== undefined) {
    if (typeof entry.collectorMessage !== "string") return "bad collectorMessage";
    lease.collectorMessage = entry.collectorMessage;
  }
  if (entry.via !== undefined) {
    if (entry.via !== "link") return "bad via";
    lease.via = entry.via;
  }
  return lease;
}

function isPositive(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value) && value > 0;
}

/** The name a corrupt file is moved to: sortable, no characters a shell would trip on. */
export function corruptFileName(wallMs: number): string {
  return `${LEASE_FILE}.corrupt-${new Date(wallMs).toISOString().replace(/[:.]/g, "-")}`;
}

/** Reads the state; a missing file is an empty state, a corrupt one is moved aside and logged. */
export async function loadLeaseState(
  stateDir: string,
  wallMs: number,
  log: (line: string) => void,
): Promise<LeaseState> {
  const file = path.join(stateDir, LEASE_FILE);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { leases: [] };
    log(`leases: cannot read ${file} (${errorMessage(error)}); starting with no leases`);
    return { leases: [] };
  }
  const parsed = parseLeaseState(text);
  if (parsed.ok) return parsed.state;
  const aside = path.join(stateDir, corruptFileName(wallMs));
  try {
    await rename(file, aside);
    log(`leases: ${file} is corrupt (${parsed.error}); moved it to ${aside} and starting with no leases`);
  } catch (error) {
    log(
      `leases: ${file} is corrupt (${parsed.error}) and could not be moved aside (${errorMessage(error)}); starting with no leases`,
    );
  }
  return { leases: [] };
}

export async function saveLeaseState(stateDir: string, state: LeaseState): Promise<void> {
  await writeFileAtomic(path.join(stateDir, LEASE_FILE), serializeLeaseState(state), 0o600);
}
