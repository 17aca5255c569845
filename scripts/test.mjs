#!/usr/bin/env node
// `npm test`: everything a fresh machine needs, then every test.
//   1. npm dependencies (npm ci when node_modules is missing or from another lockfile)
//   2. the Debian packages the real-component tests start (installed when root; otherwise
//      the exact apt-get command is printed and the run fails)
//   3. generated protocol code is fresh, buf lint is clean, TypeScript typechecks, Biome (lint and
//      format) is clean
//   4. the pure tier (`npm run test:unit`) passes as an unprivileged user
//   5. the bundles are built (end-to-end tests run the shipped files)
//   6. vitest: every test
// Extra arguments go to vitest: npm test -- packages/collector
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureNpmDependencies } from "./lib/npm-deps.mjs";
import { unprivilegedUnitTierCommand } from "./lib/unit-tier.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const step = (title) => console.log(`\n== ${title}`);
function run(command, args, options = {}) {
  const result = spawnSync(command, args, { cwd: root, stdio: "inherit", ...options });
  if (result.status !== 0) {
    console.error(`\nnpm test: '${[command, ...args].join(" ")}' failed (exit ${result.status ?? result.signal})`);
    process.exit(result.status || 1);
  }
}

step("npm dependencies");
ensureNpmDependencies(root);

step("Debian packages for real-component tests");
run("bash", ["scripts/install-test-deps.sh"]);

step("protocol: generated code is fresh, buf lint");
run("node", ["scripts/check-generated.mjs"]);
run("npx", ["buf", "lint", "proto"]);

step("typecheck");
run("npx", ["tsc", "-p", "tsconfig.json"]);

step("lint and format (biome)");
run("npx", ["biome", "check", "."]);

step("pure tier, unprivileged (npm run test:unit)");
{
  const [command, ...args] = unprivilegedUnitTierCommand(root);
  run(command, args);
}

step("build");
run("node", ["scripts/build.mjs"]);

step("tests");
run("npx", ["vitest", "run", ...process.argv.slice(2)]);
