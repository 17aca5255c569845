// Builds the shipped packaging artifacts the way CI does, into a directory of the test's own.
import path from "node:path";
import { readFileSync } from "node:fs";
import { agentBundle, repoRoot } from "../../support/process.js";
import { existsSync } from "node:fs";
import { debianPackageVersion } from "../../../packaging/deb/debian-version.mjs";
import { requireCommand, runOk } from "./tools.js";

export const rootVersion: string = (
  JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { version: string }
).version;

function requireAgentBundle(): void {
  if (!existsSync(agentBundle))
    throw new Error(`${agentBundle} is missing: run 'npm run build' (npm test builds it first)`);
}

/** scripts/build-deb.mjs into `outDir`; returns the .deb's path. */
export function buildDeb(outDir: string): string {
  requireAgentBundle();
  requireCommand("dpkg-deb", "dpkg");
  runOk(process.execPath, [path.join(repoRoot, "scripts/build-deb.mjs"), "--out", outDir], {
    env: { ...process.env, SOURCE_DATE_EPOCH: "1767225600" },
  });
  return debFile(outDir);
}

/** Where scripts/build-deb.mjs puts the .deb (the Debian revision included: ws-agent_0.1.0-1_all.deb). */
export function debFile(outDir = path.join(repoRoot, "packaging/dist")): string {
  return path.join(outDir, `ws-agent_${debianPackageVersion(rootVersion)}_all.deb`);
}

/** scripts/build-sea.mjs to `outFile`. */
export function buildSea(outFile: string): string {
  requireAgentBundle();
  runOk(process.execPath, [path.join(repoRoot, "scripts/build-sea.mjs"), "--out", outFile], { timeout: 300_000 });
  return outFile;
}
