// Builds the ws-lease CLI into one CommonJS file that any local user can run
// with plain node (the test users cannot read the repository's node_modules
// through a TypeScript loader; the bundle needs nothing but node).
import { chmod, mkdtemp, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));

export interface LeaseCliBundle {
  /** World-readable (0755) temp dir; put it first in PATH to get `ws-lease`. Remove it in afterAll. */
  dir: string;
  /** The bundled CLI: node FILE 8h --reason … */
  cli: string;
  /** node RAW SOCKET JSON: one raw request, answering the identity challenge honestly. */
  rawRequest: string;
}

export async function bundleLeaseCli(): Promise<LeaseCliBundle> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "ws-lease-test-"));
  await chmod(dir, 0o755);
  const cli = path.join(dir, "ws-lease.cjs");
  const rawRequest = path.join(dir, "raw-request.cjs");
  for (const [entry, outfile] of [
    ["ws-lease-entry.ts", cli],
    ["raw-request-entry.ts", rawRequest],
  ] as const) {
    await build({
      entryPoints: [path.join(here, entry)],
      outfile,
      bundle: true,
      platform: "node",
      format: "cjs",
      target: "node18",
      logLevel: "silent",
    });
    await chmod(outfile, 0o644);
  }
  // `ws-lease` on PATH, as a person types it.
  const launcher = path.join(dir, "ws-lease");
  await writeFile(launcher, `#!/bin/sh\nexec ${process.execPath} ${cli} "$@"\n`, { mode: 0o755 });
  await chmod(launcher, 0o755);
  return { dir, cli, rawRequest };
}
