// The command line of the pure test tier, shared by `npm run test:unit` and `npm test` (which
// runs it as an unprivileged user, so a test that needs root cannot slip into the tier).
// --configLoader runner: vite's default loader writes a temporary file beside the config, which an
// unprivileged user cannot do in a root-owned checkout.
import { spawnSync } from "node:child_process";
import path from "node:path";

const UNPRIVILEGED_USER = "nobody";

export function unitTierCommand(extraArgs = []) {
  return ["npx", "vitest", "run", "-c", "vitest.unit.config.ts", "--configLoader", "runner", ...extraArgs];
}

/**
 * The same, as `nobody` when we are root (runuser is util-linux, always on Debian). A checkout
 * that user cannot read (under a 0700 home, say) runs the tier as root instead, and says so:
 * the tier still runs, only the guard against root-only tests is lost there.
 */
export function unprivilegedUnitTierCommand(root) {
  const command = unitTierCommand();
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return command;
  const probe = spawnSync(
    "runuser",
    ["-u", UNPRIVILEGED_USER, "--", "test", "-r", path.join(root, "node_modules/vitest/package.json")],
    { stdio: "ignore" },
  );
  if (probe.status !== 0) {
    console.log(
      `test: ${UNPRIVILEGED_USER} cannot read ${root} (a parent directory is closed to other users): the pure tier runs as root`,
    );
    return command;
  }
  return [
    "runuser",
    "-u",
    UNPRIVILEGED_USER,
    "--",
    "env",
    "HOME=/tmp",
    "npm_config_cache=/tmp/ws-npm-cache",
    ...command,
  ];
}
