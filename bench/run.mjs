#!/usr/bin/env node
// Runs the benchmarks: `node bench/run.mjs [all|protocol|agent|latency|collector|failover|trust|signals|hostside|whatif|agent-variants|sample-wall|home-walks] [options for that benchmark]`.
//
// 1. builds the shipped bundles (scripts/build.mjs) unless --no-build: the benchmarks run them;
// 2. bundles bench/<name>.ts with esbuild into bench/.cache/ (TypeScript sources, @ws/protocol);
// 3. runs it; its stdout (markdown tables) is printed and kept in bench/results/<name>.md.
import { spawn, spawnSync } from "node:child_process";
import { createWriteStream, mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BENCHMARKS = [
  "protocol",
  "agent",
  "latency",
  "collector",
  "failover",
  "trust",
  "signals",
  "outreach",
  "hostside",
  "whatif",
];
/** Run only by name, not by `all`: they need options of their own. */
const BY_NAME_ONLY = ["agent-variants", "sample-wall", "capture-traffic", "collector-path", "home-walks"];
const NEEDS_BUNDLES = new Set([
  "protocol",
  "agent",
  "latency",
  "collector",
  "failover",
  "agent-variants",
  "sample-wall",
]);
/** Entry points a benchmark starts as processes of its own. */
const HELPERS = { collector: ["loadgen"] };

const argv = process.argv.slice(2);
const noBuild = argv.includes("--no-build");
const rest = argv.filter((arg) => arg !== "--no-build");
const which = rest[0] && !rest[0].startsWith("-") ? rest.shift() : "all";
if (
  which === "--help" ||
  which === "help" ||
  (which !== "all" && !BENCHMARKS.includes(which) && !BY_NAME_ONLY.includes(which))
) {
  console.error(
    `usage: node bench/run.mjs [all|${[...BENCHMARKS, ...BY_NAME_ONLY].join("|")}] [--no-build] [benchmark options]`,
  );
  process.exit(which === "--help" || which === "help" ? 0 : 2);
}
const selected = which === "all" ? BENCHMARKS : [which];

if (!noBuild && selected.some((name) => NEEDS_BUNDLES.has(name))) {
  const result = spawnSync(process.execPath, [path.join(root, "scripts/build.mjs")], { cwd: root, stdio: "inherit" });
  if (result.status !== 0) {
    console.error("bench: the build failed; the benchmarks measure the built bundles");
    process.exit(result.status || 1);
  }
}

const cacheDir = path.join(root, "bench/.cache");
const resultsDir = path.join(root, "bench/results");
mkdirSync(cacheDir, { recursive: true });
mkdirSync(resultsDir, { recursive: true });

async function bundle(name) {
  const outfile = path.join(cacheDir, `${name}.mjs`);
  await build({
    entryPoints: [path.join(root, "bench", `${name}.ts`)],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // Native addon: loaded from node_modules at run time.
    external: ["node-pty", "playwright-core"],
    // CommonJS dependencies (grpc-js) call require() for Node built-ins.
    banner: {
      js: 'import { createRequire as __wsCreateRequire } from "node:module"; const require = __wsCreateRequire(import.meta.url);',
    },
    logLevel: "warning",
  });
  return outfile;
}

function runOne(name, file, args) {
  return new Promise((resolve) => {
    // --expose-gc: benchmark 4 weighs a decoded Report on the heap.
    const child = spawn(process.execPath, ["--expose-gc", file, ...args], {
      cwd: root,
      env: { ...process.env, WS_REPO_ROOT: root },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const out = createWriteStream(path.join(resultsDir, `${name}.md`));
    child.stdout.on("data", (chunk) => {
      process.stdout.write(chunk);
      out.write(chunk);
    });
    child.on("exit", (code, signal) => {
      out.end();
      resolve(code ?? (signal ? 1 : 0));
    });
  });
}

let failed = 0;
for (const name of selected) {
  const began = Date.now();
  console.error(`\n== bench ${name}`);
  const file = await bundle(name);
  for (const helper of HELPERS[name] ?? []) await bundle(helper);
  const code = await runOne(name, file, which === "all" ? [] : rest);
  console.error(
    `== bench ${name}: ${code === 0 ? "done" : `FAILED (exit ${code})`} in ${((Date.now() - began) / 1000).toFixed(0)} s; table in bench/results/${name}.md`,
  );
  if (code !== 0) failed++;
}
process.exit(failed ? 1 : 0);
