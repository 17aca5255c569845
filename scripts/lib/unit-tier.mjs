// The command line of the pure test tier, shared by `npm run test:unit` and `npm test` (which
// runs it as an unprivileged user, so a test that needs root cannot slip into the tier).
// --configLoader runner: vite's default loader writes a temporary file beside the config, which an
// unprivileged user cannot do in a root-owned checkout.
export function unitTierCommand(extraArgs = []) {
  return ["npx", "vitest", "run", "-c", "vitest.unit.config.ts", "--configLoader", "runner", ...extraArgs];
}

/** The same, as the `nobody` user when we are root (runuser is util-linux, always on Debian). */
export function unprivilegedUnitTierCommand() {
  const command = unitTierCommand();
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return command;
  return ["runuser", "-u", "nobody", "--", "env", "HOME=/tmp", "npm_config_cache=/tmp/ws-npm-cache", ...command];
}
