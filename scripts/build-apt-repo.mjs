#!/usr/bin/env node
// Lays out an apt repository a site can host (any static web server) from the agent's .deb:
//   DIR/pool/main/w/ws-agent/ws-agent_<version>_all.deb
//   DIR/dists/SUITE/main/binary-{all,amd64,arm64}/Packages{,.gz}
//   DIR/dists/SUITE/Release            (Origin: ws, the field unattended-upgrades matches)
//   DIR/dists/SUITE/InRelease, Release.gpg, DIR/ws-archive-keyring.gpg   with --sign-key
// Every .deb already in the pool stays listed, so a host that keeps DIR keeps the old versions
// (apt picks the newest; a pin can hold one back). The indexes are written by dpkg-scanpackages
// (dpkg-dev), the Release by this script, the signatures by gpg with the site's key.
//
// Usage: node scripts/build-apt-repo.mjs [--deb FILE] [--out DIR] [--suite stable]
//                                        [--sign-key KEYID] [--gpg-homedir DIR]
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { debianPackageVersion } from "../packaging/deb/debian-version.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({
  options: {
    deb: { type: "string" },
    out: { type: "string" },
    suite: { type: "string" },
    "sign-key": { type: "string" },
    "gpg-homedir": { type: "string" },
    help: { type: "boolean", short: "h" },
  },
});
if (values.help) {
  console.log(
    "Usage: node scripts/build-apt-repo.mjs [--deb FILE] [--out DIR (packaging/dist/apt)] [--suite stable] [--sign-key KEYID] [--gpg-homedir DIR]",
  );
  process.exit(0);
}

function fail(message) {
  console.error(`build-apt-repo: ${message}`);
  process.exit(1);
}

const ARCHITECTURES = ["all", "amd64", "arm64"];
const suite = values.suite ?? "stable";
if (!/^[a-z][a-z0-9.-]*$/.test(suite)) fail(`--suite "${suite}" must be a plain name (stable, testing, ...)`);
const version = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).version;
const deb = path.resolve(
  values.deb ?? path.join(root, `packaging/dist/ws-agent_${debianPackageVersion(version)}_all.deb`),
);
if (!existsSync(deb)) fail(`${deb} is missing: run 'npm run package:deb' first`);
if (spawnSync("dpkg-scanpackages", ["--version"]).error)
  fail("dpkg-scanpackages is not installed (Debian package dpkg-dev)");

const out = path.resolve(values.out ?? path.join(root, "packaging/dist/apt"));
const pool = path.join(out, "pool/main/w/ws-agent");
mkdirSync(pool, { recursive: true });
copyFileSync(deb, path.join(pool, path.basename(deb)));

const run = (cmd, args, options = {}) => {
  const result = spawnSync(cmd, args, { encoding: "utf8", ...options });
  if (result.error || result.status !== 0) fail(`${cmd} ${args.join(" ")}: ${result.error?.message ?? result.stderr}`);
  return result.stdout;
};

// Paths in Packages are relative to the repository root, as apt expects (Filename: pool/...).
const packages = run("dpkg-scanpackages", ["--multiversion", "pool"], { cwd: out });
const dist = path.join(out, "dists", suite);
const indexFiles = [];
for (const arch of ARCHITECTURES) {
  const dir = path.join(dist, "main", `binary-${arch}`);
  mkdirSync(dir, { recursive: true });
  // ws-agent is Architecture: all; the per-architecture indexes exist (empty) so apt on amd64
  // or arm64 finds what its Release promises.
  const text = arch === "all" ? packages : "";
  writeFileSync(path.join(dir, "Packages"), text);
  writeFileSync(path.join(dir, "Packages.gz"), gzipSync(Buffer.from(text), { level: 9 }));
  writeFileSync(
    path.join(dir, "Release"),
    `Archive: ${suite}\nOrigin: ws\nLabel: ws\nComponent: main\nArchitecture: ${arch}\n`,
  );
  for (const name of ["Packages", "Packages.gz", "Release"]) indexFiles.push(`main/binary-${arch}/${name}`);
}

const date = new Date(Number(process.env.SOURCE_DATE_EPOCH ?? Math.floor(Date.now() / 1000)) * 1000).toUTCString();
const hashes = (algorithm) =>
  indexFiles
    .map((name) => {
      const data = readFileSync(path.join(dist, name));
      return ` ${createHash(algorithm).update(data).digest("hex")} ${String(data.length).padStart(8)} ${name}`;
    })
    .join("\n");
const release = [
  "Origin: ws",
  "Label: ws",
  `Suite: ${suite}`,
  `Codename: ${suite}`,
  `Date: ${date}`,
  `Architectures: ${ARCHITECTURES.join(" ")}`,
  "Components: main",
  "Description: ws in-guest agent (ws-agent)",
  "MD5Sum:",
  hashes("md5"),
  "SHA256:",
  hashes("sha256"),
  "",
].join("\n");
writeFileSync(path.join(dist, "Release"), release);

if (values["sign-key"]) {
  const gpg = ["--batch", "--yes", ...(values["gpg-homedir"] ? ["--homedir", values["gpg-homedir"]] : [])];
  const key = ["--local-user", values["sign-key"]];
  run("gpg", [...gpg, ...key, "--clearsign", "--output", path.join(dist, "InRelease"), path.join(dist, "Release")]);
  run("gpg", [
    ...gpg,
    ...key,
    "--armor",
    "--detach-sign",
    "--output",
    path.join(dist, "Release.gpg"),
    path.join(dist, "Release"),
  ]);
  run("gpg", [...gpg, "--export", "--output", path.join(out, "ws-archive-keyring.gpg"), values["sign-key"]]);
}

const listed = readdirSync(pool).filter((f) => f.endsWith(".deb"));
console.log(
  `built ${path.relative(root, out) || out}: suite ${suite}, ${listed.length} package version(s)${values["sign-key"] ? ", signed" : ", UNSIGNED (pass --sign-key)"}`,
);
