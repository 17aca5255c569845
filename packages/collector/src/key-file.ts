// Reading the token key file (the I/O beside token.ts's pure HMAC code).
import { readFileSync } from "node:fs";
import { keyFromFile, KeyError } from "./token.js";

export function loadKey(path: string): Buffer {
  let contents: Buffer;
  try {
    contents = readFileSync(path);
  } catch (error) {
    throw new KeyError(
      `cannot read key file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message} (create one with: ws-collector keygen > ${path})`,
    );
  }
  return keyFromFile(contents, path);
}
