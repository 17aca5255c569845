// Installs node_modules with `npm ci` when it is missing or was installed from another lockfile.
// Shared by npm test, npm start and npm run test:vm, which each do their own set-up.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

export function ensureNpmDependencies(root) {
  const lockHash = createHash("sha256")
    .update(readFileSync(path.join(root, "package-lock.json")))
    .digest("hex");
  const marker = path.join(root, "node_modules/.ws-lock-sha256");
  if (existsSync(marker) && readFileSync(marker, "utf8") === lockHash) {
    console.log("node_modules is up to date");
    return;
  }
  const result = spawnSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: root, stdio: "inherit" });
  if (result.status !== 0) {
    console.error(`'npm ci' failed (exit ${result.status ?? result.signal})`);
    process.exit(result.status || 1);
  }
  writeFileSync(marker, lockHash);
}
