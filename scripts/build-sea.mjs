#!/usr/bin/env node
// Builds the agent as a Node single executable application (SEA), for golden images without a
// suitable Node.js: the running node binary with the bundle injected.
//   packaging/dist/ws-agent-<platform>-<arch>   (ws-agent-linux-x64 here)
// Install it as /usr/bin/ws-agent, with /usr/bin/ws-lease a symlink to it: a SEA sees the name it
// was started under in process.argv[1], so the lease CLI dispatch works as with the .cjs file.
//
// Usage: node scripts/build-sea.mjs [--out FILE]
// Needs postject (the blob injector Node's documentation uses): from node_modules when the
// project has it, otherwise `npx postject@<pinned>` fetches it from the npm registry.
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const POSTJECT_VERSION = "1.0.0-alpha.6";
// Fixed by Node.js for every SEA-capable binary (documented in Node's single-executable-applications page).
const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({ options: { out: { type: "string" }, help: { type: "boolean", short: "h" } } });
if (values.help) {
  console.log(
    `Usage: node scripts/build-sea.mjs [--out FILE]   (default packaging/dist/ws-agent-${process.platform}-${process.arch})`,
  );
  process.exit(0);
}

function fail(message) {
  console.error(`build-sea: ${message}`);
  process.exit(1);
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: "utf8", ...options });
  if (result.error) fail(`cannot run ${command}: ${result.error.message}`);
  if (result.status !== 0)
    fail(
      `'${[command, ...args].join(" ")}' exited ${result.status ?? result.signal}:\n${result.stdout ?? ""}${result.stderr ?? ""}`,
    );
  return result.stdout;
}

const [major] = process.versions.node.split(".").map(Number);
if (major < 20)
  fail(`Node.js ${process.versions.node} cannot build single executables reliably; use Node.js 20 or later`);
const bundle = path.join(root, "packages/guest-agent/dist/ws-agent.cjs");
if (!existsSync(bundle)) fail(`${path.relative(root, bundle)} is missing: run 'node scripts/build.mjs' first`);
const out = path.resolve(
  values.out ?? path.join(root, "packaging/dist", `ws-agent-${process.platform}-${process.arch}`),
);

function postjectCommand() {
  try {
    const cli = createRequire(path.join(root, "package.json")).resolve("postject/dist/cli.js");
    return [process.execPath, [cli]];
  } catch {
    return ["npx", ["--yes", `postject@${POSTJECT_VERSION}`]];
  }
}

const work = mkdtempSync(path.join(os.tmpdir(), "ws-sea-"));
try {
  const blob = path.join(work, "ws-agent.blob");
  const seaConfig = path.join(work, "sea-config.json");
  // No code cache: it would tie the blob to V8 flags at build time, and it saves little here.
  writeFileSync(
    seaConfig,
    JSON.stringify(
      { main: bundle, output: blob, disableExperimentalSEAWarning: true, useSnapshot: false, useCodeCache: false },
      null,
      2,
    ),
  );
  run(process.execPath, ["--experimental-sea-config", seaConfig]);

  mkdirSync(path.dirname(out), { recursive: true });
  rmSync(out, { force: true });
  copyFileSync(process.execPath, out);
  chmodSync(out, 0o755);
  const [injector, injectorArgs] = postjectCommand();
  run(injector, [...injectorArgs, out, "NODE_SEA_BLOB", blob, "--sentinel-fuse", SEA_FUSE]);

  const version = run(out, ["version"], { env: { PATH: "/nonexistent" } }).trim();
  if (!/^ws-agent \S+$/.test(version)) fail(`the built binary answered 'version' with "${version}"`);
  console.log(
    `built ${path.relative(process.cwd(), out) || out} (${(statSync(out).size / 1024 / 1024).toFixed(0)} MiB, ${version}, Node.js ${process.versions.node})`,
  );
} finally {
  rmSync(work, { recursive: true, force: true });
}
