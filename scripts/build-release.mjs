#!/usr/bin/env node
// The release: a tarball for guests that take neither package, and checksums of everything.
//   DIST/ws-agent-<version>-linux-x64.tar.gz
//     ws-agent-<version>/bin/ws-agent          the single executable (no Node.js needed)
//     ws-agent-<version>/lib/ws-agent.cjs      the bundle (for a guest with Node.js >= 18)
//     ws-agent-<version>/systemd/…             the units and the udev rule
//     ws-agent-<version>/config.yaml, README.md, copyright, SHA256SUMS (of the files above)
//   DIST/SHA256SUMS                            the .deb, the .rpm, the executable, the tarball
// It packs what the other scripts built (npm run package:all runs them all, then this).
// Reproducible with SOURCE_DATE_EPOCH: sorted names, root ownership, fixed times, gzip -n.
//
// Usage: node scripts/build-release.mjs [--dist DIR (packaging/dist)]
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { debianPackageVersion } from "../packaging/deb/debian-version.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({ options: { dist: { type: "string" }, help: { type: "boolean", short: "h" } } });
if (values.help) {
  console.log("Usage: node scripts/build-release.mjs [--dist DIR]   (default DIR: packaging/dist)");
  process.exit(0);
}
function fail(message) {
  console.error(`build-release: ${message}`);
  process.exit(1);
}

const version = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).version;
const dist = path.resolve(values.dist ?? path.join(root, "packaging/dist"));
const artifacts = {
  deb: `ws-agent_${debianPackageVersion(version)}_all.deb`,
  rpm: `ws-agent-${version.replace("-", "~").replace(/-/g, ".")}-1.noarch.rpm`,
  sea: "ws-agent-linux-x64",
};
for (const [what, file] of Object.entries(artifacts)) {
  if (!existsSync(path.join(dist, file)))
    fail(`${path.join(dist, file)} is missing (${what}): run 'npm run package:all'`);
}
const bundle = path.join(root, "packages/guest-agent/dist/ws-agent.cjs");
if (!existsSync(bundle)) fail("packages/guest-agent/dist/ws-agent.cjs is missing: run 'node scripts/build.mjs'");

const sha256 = (file) => createHash("sha256").update(readFileSync(file)).digest("hex");
const sums = (dir, files) => `${files.map((f) => `${sha256(path.join(dir, f))}  ${f}`).join("\n")}\n`;

const name = `ws-agent-${version}`;
const stage = path.join(dist, `${name}.stage`);
const top = path.join(stage, name);
rmSync(stage, { recursive: true, force: true });
const put = (from, to, mode = 0o644) => {
  const target = path.join(top, to);
  mkdirSync(path.dirname(target), { recursive: true });
  cpSync(from, target);
  chmodSync(target, mode);
};
put(path.join(dist, artifacts.sea), "bin/ws-agent", 0o755);
put(bundle, "lib/ws-agent.cjs", 0o755);
for (const unit of readdirSync(path.join(root, "packaging/systemd")).sort()) {
  put(path.join(root, "packaging/systemd", unit), `systemd/${unit}`);
}
put(path.join(root, "packaging/deb/config.yaml"), "config.yaml");
put(path.join(root, "packaging/deb/README.md"), "README.md");
put(path.join(root, "packaging/deb/copyright"), "copyright");
const listed = [];
const walk = (dir, prefix = "") => {
  for (const entry of readdirSync(dir).sort()) {
    const rel = prefix ? `${prefix}/${entry}` : entry;
    if (statSync(path.join(dir, entry)).isDirectory()) walk(path.join(dir, entry), rel);
    else listed.push(rel);
  }
};
walk(top);
writeFileSync(path.join(top, "SHA256SUMS"), sums(top, listed));

const tarball = `${name}-linux-x64.tar.gz`;
const mtime = `@${process.env.SOURCE_DATE_EPOCH ?? Math.floor(Date.now() / 1000)}`;
const tar = spawnSync(
  "tar",
  ["--sort=name", "--owner=0", "--group=0", "--numeric-owner", `--mtime=${mtime}`, "-C", stage, "-cf", "-", name],
  { maxBuffer: 512 * 1024 * 1024 },
);
if (tar.status !== 0) fail(`tar failed: ${tar.stderr}`);
const gzip = spawnSync("gzip", ["-9n"], { input: tar.stdout, maxBuffer: 512 * 1024 * 1024 });
if (gzip.status !== 0) fail(`gzip failed: ${gzip.stderr}`);
writeFileSync(path.join(dist, tarball), gzip.stdout);
rmSync(stage, { recursive: true, force: true });

const released = [artifacts.deb, artifacts.rpm, artifacts.sea, tarball].sort();
writeFileSync(path.join(dist, "SHA256SUMS"), sums(dist, released));
console.log(`built ${path.join(path.relative(root, dist) || ".", tarball)} and SHA256SUMS (${released.length} files)`);
