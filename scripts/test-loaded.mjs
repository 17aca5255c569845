#!/usr/bin/env node
// `npm run test:loaded`: the end-to-end tier beside a CPU hog on every core, as on a contributor's
// busy laptop (issue 40 #7: a suite green only on a quiet machine is not green). One busy loop per
// core at normal priority, for as long as the tier runs; the tests must assert outcomes, never
// times, to pass here. CI runs it once after `npm test` (.ci/run), which has installed what the
// tests need and built the bundles; this builds the bundles again so it also runs on its own.
// Extra arguments go to vitest instead of test/e2e: npm run test:loaded -- test/e2e/leadership-burst.test.ts
import { spawn, spawnSync } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const cores = os.availableParallelism();

const build = spawnSync(process.execPath, ["scripts/build.mjs"], { cwd: root, stdio: "inherit" });
if (build.status !== 0) process.exit(build.status || 1);

const hogs = Array.from({ length: cores }, () => spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }));
const stopHogs = () => {
  for (const hog of hogs) if (hog.exitCode === null) hog.kill("SIGKILL");
};
process.on("exit", stopHogs);
for (const signal of ["SIGINT", "SIGTERM"])
  process.on(signal, () => {
    stopHogs();
    process.exit(130);
  });
console.log(`test:loaded: ${cores} busy loop(s) at normal priority (pids ${hogs.map((h) => h.pid).join(", ")})`);

const targets = process.argv.slice(2);
const tests = spawn("npx", ["vitest", "run", ...(targets.length > 0 ? targets : ["test/e2e"])], {
  cwd: root,
  stdio: "inherit",
});
tests.on("exit", (code, signal) => {
  stopHogs();
  if (code !== 0) console.error(`\ntest:loaded: the e2e tier failed beside the CPU hog (exit ${code ?? signal})`);
  process.exit(code ?? 1);
});
