// Per-VM tokens: HMAC-SHA256 of "namespace/name" under the collector's key,
// so nothing is stored per VM and a token is useless for any other VM.
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

const TOKEN_PREFIX = "wst1.";
export const MIN_KEY_BYTES = 32;

export class KeyError extends Error {
  override name = "KeyError";
}

/** Validates raw key-file contents (trailing newline tolerated). */
export function keyFromFile(contents: Buffer, path: string): Buffer {
  const text = contents.toString("utf8").trim();
  const key = Buffer.from(text, "utf8");
  if (key.length < MIN_KEY_BYTES) {
    throw new KeyError(
      `${path}: key is ${key.length} bytes; at least ${MIN_KEY_BYTES} are needed (generate one with: ws-collector keygen > ${path})`,
    );
  }
  return key;
}

export function generateKey(): string {
  return randomBytes(48).toString("base64url");
}

export function tokenFor(key: Buffer, namespace: string, name: string): string {
  return TOKEN_PREFIX + createHmac("sha256", key).update(`${namespace}/${name}`).digest("base64url");
}

export function verifyToken(key: Buffer, namespace: string, name: string, presented: string): boolean {
  const expected = Buffer.from(tokenFor(key, namespace, name));
  const actual = Buffer.from(presented);
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}
