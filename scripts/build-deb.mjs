#!/usr/bin/env node
// Builds the agent's Debian package with dpkg-deb:
//   packaging/dist/ws-agent_<version>_all.deb
// from the bundle `node scripts/build.mjs` made (packages/guest-agent/dist/ws-agent.cjs), the
// units and udev rule in packaging/systemd/, and packaging/deb/ (maintainer scripts, default
// config, README, copyright, changelog, lintian overrides). The man pages are made from the bundle's own --help texts.
//
// Usage: node scripts/build-deb.mjs [--out DIR]
// Reproducible: every file's time is SOURCE_DATE_EPOCH when set (else now), the man pages are
// gzipped without a name or time, and ownership is root:root without fakeroot.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { createHash } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import { debianPackageVersion } from "../packaging/deb/debian-version.mjs";
import { helpToMan } from "../packaging/deb/manpage.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({ options: { out: { type: "string" }, help: { type: "boolean", short: "h" } } });
if (values.help) {
  console.log("Usage: node scripts/build-deb.mjs [--out DIR]   (default DIR: packaging/dist)");
  process.exit(0);
}

function fail(message) {
  console.error(`build-deb: ${message}`);
  process.exit(1);
}

const version = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).version;
const debVersion = debianPackageVersion(version) ?? fail(`package.json version "${version}" is not semver`);
const maintainer = process.env.DEB_MAINTAINER ?? "ws maintainers <ws@aik8s.run>";
// The Debian changelog is kept in packaging/deb/changelog; its top entry must be this package.
const changelog = readFileSync(path.join(root, "packaging/deb/changelog"), "utf8");
const changelogTop = /^ws-agent \(([^)]+)\) /.exec(changelog);
if (!changelogTop || changelogTop[1] !== debVersion) {
  fail(
    `packaging/deb/changelog starts with ${changelogTop ? `version ${changelogTop[1]}` : "no ws-agent entry"}, but the package is ${debVersion}: add an entry for it (dch -v ${debVersion})`,
  );
}
const bundle = path.join(root, "packages/guest-agent/dist/ws-agent.cjs");
if (!existsSync(bundle)) fail(`${path.relative(root, bundle)} is missing: run 'node scripts/build.mjs' first`);
if (spawnSync("dpkg-deb", ["--version"]).error) fail("dpkg-deb is not installed (Debian package dpkg)");

const outDir = path.resolve(values.out ?? path.join(root, "packaging/dist"));
const packageName = `ws-agent_${debVersion}_all`;
const stage = path.join(outDir, `${packageName}.root`);
const debFile = path.join(outDir, `${packageName}.deb`);
const epochSeconds = process.env.SOURCE_DATE_EPOCH
  ? Number(process.env.SOURCE_DATE_EPOCH)
  : Math.floor(Date.now() / 1000);
if (!Number.isInteger(epochSeconds) || epochSeconds < 0)
  fail(`SOURCE_DATE_EPOCH must be a number of seconds, not "${process.env.SOURCE_DATE_EPOCH}"`);
const date = new Date(epochSeconds * 1000).toISOString().slice(0, 10);

rmSync(stage, { recursive: true, force: true });
mkdirSync(stage, { recursive: true });

function put(relative, contents, mode = 0o644) {
  const target = path.join(stage, relative);
  mkdirSync(path.dirname(target), { recursive: true });
  writeFileSync(target, contents);
  chmodSync(target, mode);
}
function copy(from, relative, mode = 0o644) {
  put(relative, readFileSync(path.join(root, from)), mode);
}
function link(relative, target) {
  mkdirSync(path.dirname(path.join(stage, relative)), { recursive: true });
  symlinkSync(target, path.join(stage, relative));
}

// The program: one file, two names (it dispatches on the name it was started under).
copy(path.relative(root, bundle), "usr/lib/ws-agent/ws-agent.cjs", 0o755);
link("usr/bin/ws-agent", "../lib/ws-agent/ws-agent.cjs");
link("usr/bin/ws-lease", "../lib/ws-agent/ws-agent.cjs");

for (const unit of ["ws-agent.service", "ws-agent-grow.service", "ws-agent-grow.path", "run-ws-credential.mount"]) {
  copy(`packaging/systemd/${unit}`, `lib/systemd/system/${unit}`);
}
copy("packaging/systemd/99-ws-agent-grow.rules", "lib/udev/rules.d/99-ws-agent-grow.rules");
copy("packaging/deb/config.yaml", "etc/ws-agent/config.yaml");
copy("packaging/deb/README.md", "usr/share/doc/ws-agent/README.md");
copy("packaging/deb/copyright", "usr/share/doc/ws-agent/copyright");
// gzip -9n: no name, no time in the header (reproducible).
put("usr/share/doc/ws-agent/changelog.Debian.gz", gzipSync(changelog, { level: 9 }));
copy("packaging/deb/lintian-overrides", "usr/share/lintian/overrides/ws-agent");

// Man pages from the --help texts.
function helpOf(...args) {
  const result = spawnSync(process.execPath, [bundle, ...args], {
    encoding: "utf8",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
  });
  if (result.status !== 0)
    fail(`'ws-agent ${args.join(" ")}' exited ${result.status ?? result.signal}: ${result.stderr}`);
  return result.stdout;
}
const mainHelp = helpOf("--help");
const commandNames = [...mainHelp.matchAll(/^ {2}([a-z][a-z-]*) {2,}\S/gm)]
  .map((m) => m[1])
  .filter((name) => name !== "version" && name !== "lease");
if (!commandNames.includes("run") || !commandNames.includes("probe"))
  fail(`cannot find the commands in 'ws-agent --help':\n${mainHelp}`);
const source = `ws ${version}`;
const agentPage = helpToMan({
  name: "ws-agent",
  section: 8,
  date,
  source,
  manual: "System Administration",
  help: mainHelp,
  commands: commandNames.map((name) => ({ name, help: helpOf(name, "--help") })),
  seeAlso: ["ws-lease(1)", "systemctl(1)", "journalctl(1)", "/usr/share/doc/ws-agent/README.md"],
});
const leasePage = helpToMan({
  name: "ws-lease",
  section: 1,
  date,
  source,
  manual: "User Commands",
  help: helpOf("lease", "--man"),
});
put("usr/share/man/man8/ws-agent.8.gz", gzipSync(agentPage, { level: 9 }));
put("usr/share/man/man1/ws-lease.1.gz", gzipSync(leasePage, { level: 9 }));

// Control area.
function walk(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? [full, ...walk(full)] : [full];
  });
}
const entries = walk(stage);
const files = entries.filter((p) => lstatSync(p).isFile());
const installedKiB = entries.reduce(
  (sum, p) => sum + (lstatSync(p).isFile() ? Math.ceil(statSync(p).size / 1024) : 1),
  0,
);
const control = `Package: ws-agent
Version: ${debVersion}
Architecture: all
Maintainer: ${maintainer}
Installed-Size: ${installedKiB}
Depends: nodejs (>= 18), init-system-helpers (>= 1.54~)
Recommends: cloud-guest-utils, e2fsprogs, fdisk
Suggests: cloud-init, xfsprogs, btrfs-progs, lvm2, libnotify-bin
Section: admin
Priority: optional
Description: in-guest agent of ws: idle signals, keep-running leases, stop notices
 ws decides when a persistent KubeVirt workstation VM is idle and stops it,
 from every signal of use inside the guest, with a warning first.
 .
 This package runs the agent (ws-agent.service): it reports Jupyter kernels and
 terminals, SSH and terminal input, code-server, GPU utilization, background
 CPU/network/disk work, logind idle inhibitors and leases to the collector,
 shows stop notices to logged-in users, and serves ws-lease, with which users
 keep the VM running. It also seals golden images (ws-agent seal) and grows
 the root filesystem when the disk was enlarged (ws-agent-grow.service).
`;
put("DEBIAN/control", control);
put("DEBIAN/conffiles", "/etc/ws-agent/config.yaml\n");
put(
  "DEBIAN/md5sums",
  files.map((p) => `${createHash("md5").update(readFileSync(p)).digest("hex")}  ${path.relative(stage, p)}\n`).join(""),
);
for (const script of ["postinst", "prerm", "postrm"]) copy(`packaging/deb/${script}`, `DEBIAN/${script}`, 0o755);

for (const p of [...walk(stage), stage]) {
  const info = lstatSync(p);
  if (info.isDirectory()) chmodSync(p, 0o755);
  if (!info.isSymbolicLink()) utimesSync(p, epochSeconds, epochSeconds);
}

rmSync(debFile, { force: true });
const built = spawnSync("dpkg-deb", ["--root-owner-group", "-Zxz", "--build", stage, debFile], {
  encoding: "utf8",
  env: { ...process.env, SOURCE_DATE_EPOCH: String(epochSeconds) },
});
rmSync(stage, { recursive: true, force: true });
if (built.status !== 0) fail(`dpkg-deb failed:\n${built.stdout}${built.stderr}`);
console.log(
  `built ${path.relative(process.cwd(), debFile) || debFile} (${(statSync(debFile).size / 1024).toFixed(0)} KiB)`,
);
