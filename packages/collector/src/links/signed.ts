// Signed links a person opens (keep running, start): HMAC-SHA256 over a small JSON payload that
// names the VM and an expiry, under a key derived per purpose from the collector's token key. A
// link of one purpose can never stand in for another's (different key, different version tag), a
// link is useless for any other VM, and nothing is stored per link: rotating the token key ends
// every link at once. Pure.
import { createHmac, timingSafeEqual } from "node:crypto";
import type { VmKey } from "../model/vm-key.js";

/** What every signed link carries: the VM it is for and when it stops working. */
export interface LinkClaims {
  namespace: string;
  name: string;
  expiresAtMs: number;
}

export type LinkProblem = "malformed" | "tampered" | "expired" | "other-vm";

export type LinkVerdict<C extends LinkClaims> =
  | { ok: true; claims: C }
  | { ok: false; problem: LinkProblem; claims?: C };

/** One kind of link: its version tag, the key-derivation label, and how its own fields travel. */
export interface LinkKind<C extends LinkClaims> {
  /** "k1", "s1": the token's first part; bumped when the payload's meaning changes. */
  version: string;
  /** Label the kind's key is derived under (never the raw token key). */
  keyLabel: string;
  /** The kind's own fields (beyond ns, n, exp) as JSON values. */
  encode(claims: C): Record<string, string | number>;
  /** The kind's own fields back, or undefined when they are not there or have the wrong types. */
  decode(raw: Record<string, unknown>, base: LinkClaims): C | undefined;
}

const MAX_TOKEN_LENGTH = 1024;
const b64 = (data: Buffer | string) => Buffer.from(data).toString("base64url");

/** The key of one kind of link, derived from the collector's token key. */
export function deriveKindKey(tokenKey: Buffer, kind: Pick<LinkKind<LinkClaims>, "keyLabel">): Buffer {
  return createHmac("sha256", tokenKey).update(kind.keyLabel).digest();
}

function mac(key: Buffer, version: string, payload: string): Buffer {
  return createHmac("sha256", key).update(`${version}.${payload}`).digest();
}

export function signLink<C extends LinkClaims>(kind: LinkKind<C>, key: Buffer, claims: C): string {
  const payload = b64(
    JSON.stringify({
      ns: claims.namespace,
      n: claims.name,
      ...kind.encode(claims),
      exp: Math.round(claims.expiresAtMs),
    }),
  );
  return `${kind.version}.${payload}.${b64(mac(key, kind.version, payload))}`;
}

/**
 * The token as signed when a person copied its link with what followed it in a sentence (a
 * ".", ",", ")"). Safe: a token ends with its signature, base64url ([A-Za-z0-9_-], never
 * empty), so characters outside that alphabet at its end were never part of it, and what is
 * left must still carry a valid signature to be accepted.
 */
export function copiedToken(token: string): string {
  return token.replace(/[^\w-]+$/, "");
}

/** Checks format, signature, that the link is for `vm` (the VM its path names), then expiry. */
export function verifyLink<C extends LinkClaims>(
  kind: LinkKind<C>,
  key: Buffer,
  token: string,
  vm: VmKey,
  nowMs: number,
): LinkVerdict<C> {
  if (token.length > MAX_TOKEN_LENGTH) return { ok: false, problem: "malformed" };
  const parts = copiedToken(token).split(".");
  if (parts.length !== 3 || parts[0] !== kind.version || !/^[\w-]+$/.test(parts[1]!) || !/^[\w-]+$/.test(parts[2]!))
    return { ok: false, problem: "malformed" };
  const expected = mac(key, kind.version, parts[1]!);
  const given = Buffer.from(parts[2]!, "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, problem: "tampered" };
  let claims: C | undefined;
  try {
    const raw = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8")) as Record<string, unknown>;
    if (typeof raw.ns !== "string" || typeof raw.n !== "string" || typeof raw.exp !== "number")
      return { ok: false, problem: "malformed" };
    claims = kind.decode(raw, { namespace: raw.ns, name: raw.n, expiresAtMs: raw.exp });
  } catch {
    return { ok: false, problem: "malformed" };
  }
  if (!claims) return { ok: false, problem: "malformed" };
  if (claims.namespace !== vm.namespace || claims.name !== vm.name) return { ok: false, problem: "other-vm", claims };
  if (nowMs >= claims.expiresAtMs) return { ok: false, problem: "expired", claims };
  return { ok: true, claims };
}

/** PUBLIC_URL/PATH/NAMESPACE/NAME?t=TOKEN. */
export function linkUrl<C extends LinkClaims>(
  publicUrl: string,
  path: string,
  kind: LinkKind<C>,
  key: Buffer,
  claims: C,
): string {
  return `${publicUrl}/${path}/${encodeURIComponent(claims.namespace)}/${encodeURIComponent(claims.name)}?t=${signLink(kind, key, claims)}`;
}
