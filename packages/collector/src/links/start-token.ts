// The start link's token: a signed link (links/signed.ts) bound to one VM, usable again and again
// until it expires (notifications.startLinkTtl, 14 days by default) or the token key rotates. It
// carries no notice: a start is not tied to one stop, and starting a VM that already runs only
// shows its progress. Its key is derived under its own label, so a keep-running link is never
// a start link. Pure.
import type { VmKey } from "../model/vm-key.js";
import { deriveKindKey, linkUrl, signLink, verifyLink, type LinkKind, type LinkVerdict } from "./signed.js";

export interface StartClaims {
  namespace: string;
  name: string;
  expiresAtMs: number;
}

export type StartVerdict = LinkVerdict<StartClaims>;

const START_LINK: LinkKind<StartClaims> = {
  version: "s1",
  keyLabel: "ws-collector start link v1",
  encode: () => ({}),
  decode: (_raw, base) => base,
};

export const DEFAULT_START_LINK_TTL_SECONDS = 14 * 24 * 3600;

export function deriveStartLinkKey(tokenKey: Buffer): Buffer {
  return deriveKindKey(tokenKey, START_LINK);
}

export function signStartLink(key: Buffer, claims: StartClaims): string {
  return signLink(START_LINK, key, claims);
}

export function verifyStartLink(key: Buffer, token: string, vm: VmKey, nowMs: number): StartVerdict {
  return verifyLink(START_LINK, key, token, vm, nowMs);
}

/** /start/NAMESPACE/NAME?t=TOKEN under the collector's public URL, valid for ttlSeconds from nowMs. */
export function startLinkUrl(publicUrl: string, key: Buffer, vm: VmKey, nowMs: number, ttlSeconds: number): string {
  return linkUrl(publicUrl, "start", START_LINK, key, {
    namespace: vm.namespace,
    name: vm.name,
    expiresAtMs: nowMs + ttlSeconds * 1000,
  });
}
