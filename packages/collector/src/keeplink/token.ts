// The keep-running link's token: HMAC-SHA256 over the VM, the notice and the
// expiry, under a key derived from the collector's token key (so a link can
// never stand in for an agent token, and nothing is stored per link). Pure.
import { createHmac, timingSafeEqual } from "node:crypto";
import type { VmKey } from "../model/vm-key.js";

export interface KeepClaims {
  namespace: string;
  name: string;
  noticeId: string;
  /** The link stops working here: the notice's deadline (the end of the grace period). */
  expiresAtMs: number;
}

export type KeepVerdict =
  | { ok: true; claims: KeepClaims }
  | { ok: false; problem: "malformed" | "tampered" | "expired" | "other-vm"; claims?: KeepClaims };

const VERSION = "k1";
const MAX_TOKEN_LENGTH = 1024;

/** The link key: derived, so the agents' token key is never used for anything else directly. */
export function deriveLinkKey(tokenKey: Buffer): Buffer {
  return createHmac("sha256", tokenKey).update("ws-collector keep-running link v1").digest();
}

const b64 = (data: Buffer | string) => Buffer.from(data).toString("base64url");

function mac(key: Buffer, payload: string): Buffer {
  return createHmac("sha256", key).update(`${VERSION}.${payload}`).digest();
}

export function signKeepLink(key: Buffer, claims: KeepClaims): string {
  const payload = b64(
    JSON.stringify({ ns: claims.namespace, n: claims.name, id: claims.noticeId, exp: Math.round(claims.expiresAtMs) }),
  );
  return `${VERSION}.${payload}.${b64(mac(key, payload))}`;
}

/** Checks signature, expiry and that the link is for `vm` (the VM its path names). */
export function verifyKeepLink(key: Buffer, token: string, vm: VmKey, nowMs: number): KeepVerdict {
  if (token.length > MAX_TOKEN_LENGTH) return { ok: false, problem: "malformed" };
  const parts = token.split(".");
  if (parts.length !== 3 || parts[0] !== VERSION || !/^[\w-]+$/.test(parts[1]!) || !/^[\w-]+$/.test(parts[2]!))
    return { ok: false, problem: "malformed" };
  const expected = mac(key, parts[1]!);
  const given = Buffer.from(parts[2]!, "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, problem: "tampered" };
  let claims: KeepClaims;
  try {
    const raw = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8")) as Record<string, unknown>;
    if (
      typeof raw.ns !== "string" ||
      typeof raw.n !== "string" ||
      typeof raw.id !== "string" ||
      typeof raw.exp !== "number"
    )
      return { ok: false, problem: "malformed" };
    claims = { namespace: raw.ns, name: raw.n, noticeId: raw.id, expiresAtMs: raw.exp };
  } catch {
    return { ok: false, problem: "malformed" };
  }
  if (claims.namespace !== vm.namespace || claims.name !== vm.name) return { ok: false, problem: "other-vm", claims };
  if (nowMs >= claims.expiresAtMs) return { ok: false, problem: "expired", claims };
  return { ok: true, claims };
}

/** The link a person opens: /keep/NAMESPACE/NAME?t=TOKEN under the collector's public URL. */
export function keepLinkUrl(publicUrl: string, key: Buffer, claims: KeepClaims): string {
  return `${publicUrl}/keep/${encodeURIComponent(claims.namespace)}/${encodeURIComponent(claims.name)}?t=${signKeepLink(key, claims)}`;
}

/** Remembers used links (one grant per notice) until they expire; bounded. */
export class UsedLinks {
  private readonly used = new Map<string, { atMs: number; expiresAtMs: number; seconds: number }>();
  constructor(private readonly limit = 10_000) {}

  private keyOf(claims: KeepClaims): string {
    return `${claims.namespace}/${claims.name}#${claims.noticeId}`;
  }

  usedAt(claims: KeepClaims): { atMs: number; seconds: number } | undefined {
    return this.used.get(this.keyOf(claims));
  }

  markUsed(claims: KeepClaims, atMs: number, seconds: number): void {
    for (const [key, entry] of this.used) if (entry.expiresAtMs <= atMs) this.used.delete(key);
    // Over the limit the oldest go first; an expired link is refused by its expiry anyway.
    while (this.used.size >= this.limit) this.used.delete(this.used.keys().next().value!);
    this.used.set(this.keyOf(claims), { atMs, expiresAtMs: claims.expiresAtMs, seconds });
  }
}
