#!/usr/bin/env node
// Bundles the shipped artifacts:
//   packages/guest-agent/dist/ws-agent.cjs   one file, CommonJS, Node >= 18, no node_modules needed
//   packages/guest-agent/dist/ws-lease       the same file under the lease CLI's name (symlink)
//   packages/collector/dist/ws-collector.cjs one file, Node >= 20
import { build } from "esbuild";
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, symlinkSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const version = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).version;

const common = {
  bundle: true,
  platform: "node",
  format: "cjs",
  sourcemap: false,
  legalComments: "none",
  banner: { js: "#!/usr/bin/env node" },
  define: { __WS_VERSION__: JSON.stringify(version) },
  logLevel: "warning",
};

// Written beside and renamed into place: a build while the bundles run (npm start's build during
// a test run, a second npm start) never leaves a half-written file for a process starting then.
async function bundle({ entry, outfile, target, external = [] }) {
  mkdirSync(path.dirname(outfile), { recursive: true });
  const partial = `${outfile}.${process.pid}.partial`;
  const result = await build({ ...common, entryPoints: [entry], outfile: partial, target, external, metafile: true });
  chmodSync(partial, 0o755);
  renameSync(partial, outfile);
  const bytes = Object.values(result.metafile.outputs)[0].bytes;
  console.log(`built ${path.relative(root, outfile)} (${(bytes / 1024).toFixed(0)} KiB)`);
}

const agentDist = path.join(root, "packages/guest-agent/dist");
await bundle({
  entry: path.join(root, "packages/guest-agent/src/main.ts"),
  outfile: path.join(agentDist, "ws-agent.cjs"),
  target: "node18",
});
const leaseLink = path.join(agentDist, `ws-lease.${process.pid}.partial`);
rmSync(leaseLink, { force: true });
symlinkSync("ws-agent.cjs", leaseLink);
renameSync(leaseLink, path.join(agentDist, "ws-lease"));

await bundle({
  entry: path.join(root, "packages/collector/src/cli/main.ts"),
  outfile: path.join(root, "packages/collector/dist/ws-collector.cjs"),
  target: "node20",
});
