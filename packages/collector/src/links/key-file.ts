// Reading the token key file (the I/O beside links/agent-token.ts's pure HMAC code).
import { readFileSync } from "node:fs";
import { keyFromFile, KeyError } from "./agent-token.js";
import { errorMessage } from "@ws/protocol";

export function loadKey(path: string): Buffer {
  let contents: Buffer;
  try {
    contents = readFileSync(path);
  } catch (error) {
    throw new KeyError(
      `cannot read key file ${path}: ${(error as NodeJS.ErrnoException).code ?? errorMessage(error)} (create one with: ws-collector keygen > ${path})`,
    );
  }
  return keyFromFile(contents, path);
}
