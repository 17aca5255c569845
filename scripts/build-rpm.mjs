#!/usr/bin/env node
// Builds the agent's rpm with rpmbuild, for the RHEL family the field guides meet (Fedora,
// CentOS Stream, Rocky, RHEL):
//   packaging/dist/ws-agent-<version>-1.noarch.rpm
// from the same files as the .deb (the bundle, the units, the udev rule, the default config, the
// man pages made from --help), at the paths the RHEL family uses (/usr/lib/systemd/system,
// /usr/lib/udev/rules.d), with packaging/rpm/ws-agent.spec's scriptlets. The .deb's tree is the
// source: scripts/build-deb.mjs runs first (it makes the man pages), and dpkg-deb unpacks it.
//
// Usage: node scripts/build-rpm.mjs [--out DIR]
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { debianPackageVersion } from "../packaging/deb/debian-version.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({ options: { out: { type: "string" }, help: { type: "boolean", short: "h" } } });
if (values.help) {
  console.log("Usage: node scripts/build-rpm.mjs [--out DIR]   (default DIR: packaging/dist)");
  process.exit(0);
}

function fail(message) {
  console.error(`build-rpm: ${message}`);
  process.exit(1);
}

function run(cmd, args, options = {}) {
  const result = spawnSync(cmd, args, { encoding: "utf8", ...options });
  if (result.error)
    fail(`${cmd} is not installed (${cmd === "rpmbuild" ? "Debian package rpm" : "Debian package dpkg"})`);
  if (result.status !== 0) fail(`${cmd} ${args.join(" ")} failed:\n${result.stdout}${result.stderr}`);
  return result.stdout;
}

const version = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).version;
// rpm versions have no "-": a prerelease 0.2.0-rc.1 becomes 0.2.0~rc.1, which sorts before 0.2.0.
const rpmVersion = version.replace("-", "~").replace(/-/g, ".");
const outDir = path.resolve(values.out ?? path.join(root, "packaging/dist"));
mkdirSync(outDir, { recursive: true });

const work = mkdtempSync(path.join(os.tmpdir(), "ws-rpm-"));
try {
  // The .deb's files, built into the work directory (the same bundle, units and man pages).
  run(process.execPath, [path.join(root, "scripts/build-deb.mjs"), "--out", path.join(work, "deb")]);
  const deb = path.join(work, "deb", `ws-agent_${debianPackageVersion(version)}_all.deb`);
  if (!existsSync(deb)) fail(`build-deb made no ${path.basename(deb)}`);
  const debTree = path.join(work, "debtree");
  run("dpkg-deb", ["-x", deb, debTree]);

  // The RHEL family's layout: units and udev rules under /usr/lib; no Debian-only files.
  const tree = path.join(work, "SOURCES", "tree");
  const move = (from, to) => {
    mkdirSync(path.dirname(path.join(tree, to)), { recursive: true });
    cpSync(path.join(debTree, from), path.join(tree, to), { recursive: true, verbatimSymlinks: true });
  };
  move("usr/lib/ws-agent", "usr/lib/ws-agent");
  // The RHEL family forbids env shebangs in packages: the interpreter is nodejs's /usr/bin/node.
  const program = path.join(tree, "usr/lib/ws-agent/ws-agent.cjs");
  writeFileSync(program, readFileSync(program, "utf8").replace(/^#!\/usr\/bin\/env node\n/, "#!/usr/bin/node\n"));
  chmodSync(program, 0o755);
  move("usr/bin", "usr/bin");
  move("lib/systemd/system", "usr/lib/systemd/system");
  move("lib/udev/rules.d", "usr/lib/udev/rules.d");
  move("etc/ws-agent", "etc/ws-agent");
  move("usr/share/man", "usr/share/man");
  mkdirSync(path.join(tree, "usr/share/doc/ws-agent"), { recursive: true });
  cpSync(path.join(root, "packaging/deb/README.md"), path.join(tree, "usr/share/doc/ws-agent/README.md"));
  mkdirSync(path.join(tree, "usr/share/licenses/ws-agent"), { recursive: true });
  cpSync(path.join(root, "packaging/deb/copyright"), path.join(tree, "usr/share/licenses/ws-agent/copyright"));

  const spec = readFileSync(path.join(root, "packaging/rpm/ws-agent.spec"), "utf8").replace(/@VERSION@/g, rpmVersion);
  const specFile = path.join(work, "SPECS", "ws-agent.spec");
  mkdirSync(path.dirname(specFile), { recursive: true });
  writeFileSync(specFile, spec);
  const epoch = process.env.SOURCE_DATE_EPOCH;
  run("rpmbuild", [
    "-bb",
    "--define",
    `_topdir ${work}`,
    "--define",
    "_build_id_links none",
    ...(epoch
      ? ["--define", "use_source_date_epoch_as_buildtime 1", "--define", "clamp_mtime_to_source_date_epoch 1"]
      : []),
    specFile,
  ]);
  const built = path.join(work, "RPMS", "noarch", `ws-agent-${rpmVersion}-1.noarch.rpm`);
  if (!existsSync(built)) fail(`rpmbuild made no ${path.basename(built)}`);
  const target = path.join(outDir, path.basename(built));
  rmSync(target, { force: true });
  renameSync(built, target);
  console.log(`built ${path.relative(root, target)}`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
