#!/usr/bin/env node
// `npm run test:vm`: the packaged agent in a real booted VM (test/vm/, see its README).
//   1. npm dependencies (npm ci when node_modules is missing or older than the lockfile)
//   2. the Debian packages (debootstrap, QEMU, …; installed when root, as npm test does)
//   3. the bundles and the .deb (reproducible: an unchanged tree gives the same .deb, so the
//      cached image under .cache/vm/ is reused)
//   4. vitest with test/vm/vitest.config.ts: the image is built there when the cache is cold
// Needs root (debootstrap, chroot). Extra arguments go to vitest.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureNpmDependencies } from "./lib/npm-deps.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const started = Date.now();
const elapsed = () => `${Math.round((Date.now() - started) / 1000)} s`;
const step = (title) => console.log(`\n== ${title} (${elapsed()})`);
function run(command, args, options = {}) {
  const result = spawnSync(command, args, { cwd: root, stdio: "inherit", ...options });
  if (result.status !== 0) {
    console.error(
      `\ntest:vm: '${[command, ...args].join(" ")}' failed (exit ${result.status ?? result.signal}) after ${elapsed()}`,
    );
    process.exit(result.status || 1);
  }
}

if (process.getuid?.() !== 0) {
  console.error("test:vm: needs root (the image is built with debootstrap and chroot)");
  process.exit(1);
}

step("npm dependencies");
ensureNpmDependencies(root);

step("Debian packages");
run("bash", ["scripts/install-test-deps.sh"]);

step("build: bundles and the .deb");
run("node", ["scripts/build.mjs"]);
// The .deb's file times come from SOURCE_DATE_EPOCH: pin it to the last commit, so the same tree
// gives the same bytes and the image cache (keyed by them) is hit.
const lastCommit = spawnSync("git", ["log", "-1", "--format=%ct"], { cwd: root, encoding: "utf8" });
const epoch =
  process.env.SOURCE_DATE_EPOCH ??
  (lastCommit.status === 0 && lastCommit.stdout.trim() ? lastCommit.stdout.trim() : "0");
run("node", ["scripts/build-deb.mjs"], { env: { ...process.env, SOURCE_DATE_EPOCH: epoch } });

step("VM tests");
run("npx", ["vitest", "run", "--config", "test/vm/vitest.config.ts", ...process.argv.slice(2)]);
console.log(`\ntest:vm: passed in ${elapsed()}`);
