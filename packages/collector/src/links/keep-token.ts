// The keep-running link's token: a signed link (links/signed.ts) over the VM, the notice and the
// expiry, under a key derived from the collector's token key (so a link can never stand in for
// an agent token or a start link, and nothing is stored per link). Pure.
import type { VmKey } from "../model/vm-key.js";
import { deriveKindKey, linkUrl, signLink, verifyLink, type LinkKind, type LinkVerdict } from "./signed.js";

export interface KeepClaims {
  namespace: string;
  name: string;
  noticeId: string;
  /** The link stops working here: the notice's deadline (the end of the grace period). */
  expiresAtMs: number;
}

export type KeepVerdict = LinkVerdict<KeepClaims>;

const KEEP_LINK: LinkKind<KeepClaims> = {
  version: "k1",
  keyLabel: "ws-collector keep-running link v1",
  encode: (claims) => ({ id: claims.noticeId }),
  decode: (raw, base) => (typeof raw.id === "string" ? { ...base, noticeId: raw.id } : undefined),
};

/** The link key: derived, so the agents' token key is never used for anything else directly. */
export function deriveLinkKey(tokenKey: Buffer): Buffer {
  return deriveKindKey(tokenKey, KEEP_LINK);
}

export function signKeepLink(key: Buffer, claims: KeepClaims): string {
  return signLink(KEEP_LINK, key, claims);
}

/** Checks signature, expiry and that the link is for `vm` (the VM its path names). */
export function verifyKeepLink(key: Buffer, token: string, vm: VmKey, nowMs: number): KeepVerdict {
  return verifyLink(KEEP_LINK, key, token, vm, nowMs);
}

/** The link a person opens: /keep/NAMESPACE/NAME?t=TOKEN under the collector's public URL. */
export function keepLinkUrl(publicUrl: string, key: Buffer, claims: KeepClaims): string {
  return linkUrl(publicUrl, "keep", KEEP_LINK, key, claims);
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
