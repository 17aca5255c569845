#!/usr/bin/env node
// `npm run test:unit`: the pure tier (vitest.unit.config.ts). npm dependencies only: no root, no
// Debian packages, no build. Extra arguments go to vitest.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureNpmDependencies } from "./lib/npm-deps.mjs";
import { unitTierCommand } from "./lib/unit-tier.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
ensureNpmDependencies(root);
const [command, ...args] = unitTierCommand(process.argv.slice(2));
const result = spawnSync(command, args, { cwd: root, stdio: "inherit" });
process.exit(result.status ?? 1);
