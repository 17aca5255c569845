// Where the repository and the shipped artifacts are. bench/run.mjs bundles each
// benchmark into bench/.cache/ and passes the root in WS_REPO_ROOT.
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = process.env.WS_REPO_ROOT ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const agentBundle = path.join(repoRoot, "packages/guest-agent/dist/ws-agent.cjs");
export const collectorBundle = path.join(repoRoot, "packages/collector/dist/ws-collector.cjs");

export function requireBundles(): void {
  for (const file of [agentBundle, collectorBundle]) {
    if (!existsSync(file))
      throw new Error(`${file} is missing: run 'npm run build' (bench/run.mjs builds it unless --no-build)`);
  }
}
