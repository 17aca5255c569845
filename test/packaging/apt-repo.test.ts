// The apt repository scripts/build-apt-repo.mjs lays out, read by the real apt: signed with a
// throwaway key and trusted through signed-by, apt sees ws-agent with origin "ws" (what an
// unattended-upgrades Origins-Pattern matches) and downloads the very .deb; the same layout
// unsigned is refused; a second version added to the pool becomes the candidate.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../support/process.js";
import { buildDeb } from "./lib/artifacts.js";
import { requireCommand, run, runOk } from "./lib/tools.js";

let work: string;
let deb: string;
const gnupg = () => path.join(work, "gnupg");

beforeAll(() => {
  requireCommand("dpkg-scanpackages", "dpkg-dev");
  requireCommand("gpg", "gpg");
  requireCommand("apt-get", "apt");
  work = mkdtempSync(path.join(os.tmpdir(), "ws-apt-"));
  deb = buildDeb(path.join(work, "out"));
  mkdirSync(gnupg(), { mode: 0o700 });
  runOk("gpg", [
    "--batch",
    "--homedir",
    gnupg(),
    "--passphrase",
    "",
    "--quick-gen-key",
    "ws test archive <archive@example.org>",
    "ed25519",
    "sign",
    "1d",
  ]);
}, 180_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

function buildRepo(out: string, extra: string[] = [], debFile = deb): string {
  return runOk(process.execPath, [
    path.join(repoRoot, "scripts/build-apt-repo.mjs"),
    "--deb",
    debFile,
    "--out",
    out,
    ...extra,
  ]).stdout;
}

/** apt-get/apt-cache with a private state, cache and sources list: nothing of the host's apt is touched. */
function apt(dir: string, sourceLine: string) {
  const state = path.join(dir, "apt-state");
  for (const sub of ["lists/partial", "cache/archives/partial", "etc/preferences.d", "etc/trusted.gpg.d"])
    mkdirSync(path.join(state, sub), { recursive: true });
  writeFileSync(path.join(state, "etc/sources.list"), `${sourceLine}\n`);
  const options = [
    "-o",
    `Dir::State=${state}`,
    "-o",
    `Dir::State::status=${path.join(state, "status")}`,
    "-o",
    `Dir::Cache=${path.join(state, "cache")}`,
    "-o",
    `Dir::Etc::SourceList=${path.join(state, "etc/sources.list")}`,
    "-o",
    "Dir::Etc::SourceParts=/nonexistent",
    "-o",
    `Dir::Etc::Preferences=${path.join(state, "etc/preferences")}`,
    "-o",
    `Dir::Etc::PreferencesParts=${path.join(state, "etc/preferences.d")}`,
    "-o",
    `Dir::Etc::TrustedParts=${path.join(state, "etc/trusted.gpg.d")}`,
    "-o",
    "APT::Sandbox::User=root",
    "-o",
    "APT::Architecture=amd64",
  ];
  writeFileSync(path.join(state, "status"), "");
  return {
    get: (args: string[]) => run("apt-get", [...options, ...args], { cwd: dir }),
    cache: (args: string[]) => run("apt-cache", [...options, ...args], { cwd: dir }),
  };
}

describe("the apt repository", () => {
  it("signed: apt trusts it through signed-by, sees origin ws and downloads the same .deb", () => {
    const repo = path.join(work, "signed");
    expect(buildRepo(repo, ["--sign-key", "archive@example.org", "--gpg-homedir", gnupg()])).toMatch(/signed$/m);
    const release = readFileSync(path.join(repo, "dists/stable/Release"), "utf8");
    expect(release).toMatch(/^Origin: ws$/m);
    expect(release).toMatch(/^Architectures: all amd64 arm64$/m);
    const client = apt(work, `deb [signed-by=${path.join(repo, "ws-archive-keyring.gpg")}] file://${repo} stable main`);
    const update = client.get(["update"]);
    expect(update.status, update.output).toBe(0);
    expect(update.output).not.toMatch(/^W:|^E:/m);
    const policy = client.cache(["policy", "ws-agent"]);
    expect(policy.stdout).toMatch(/Candidate: 0\.1\.0-1/);
    // The origin unattended-upgrades' Origins-Pattern "origin=ws,suite=stable" matches.
    expect(client.cache(["policy"]).stdout).toMatch(/release o=ws,a=stable,n=stable,l=ws,c=main,b=all/);
    const downloaded = client.get(["download", "ws-agent"]);
    expect(downloaded.status, downloaded.output).toBe(0);
    const fetched = readFileSync(path.join(work, path.basename(deb)));
    expect(fetched.equals(readFileSync(deb))).toBe(true);
    rmSync(path.join(work, path.basename(deb)));
  });

  it("unsigned: apt refuses the same layout", () => {
    const repo = path.join(work, "unsigned");
    expect(buildRepo(repo)).toMatch(/UNSIGNED/);
    const dir = path.join(work, "unsigned-client");
    mkdirSync(dir);
    const update = apt(dir, `deb file://${repo} stable main`).get(["update"]);
    expect(update.output).toMatch(/not signed|NO_PUBKEY|is not signed/);
  });

  it("keeps earlier versions in the pool; the newer becomes the candidate", () => {
    const repo = path.join(work, "two");
    buildRepo(repo, ["--sign-key", "archive@example.org", "--gpg-homedir", gnupg()]);
    // The same package relabelled 0.1.1-1, as a next release would be.
    const tree = path.join(work, "tree");
    runOk("dpkg-deb", ["-R", deb, tree]);
    const control = path.join(tree, "DEBIAN/control");
    writeFileSync(control, readFileSync(control, "utf8").replace(/^Version: .*$/m, "Version: 0.1.1-1"));
    const next = path.join(work, "ws-agent_0.1.1-1_all.deb");
    execFileSync("dpkg-deb", ["--root-owner-group", "-b", tree, next], { stdio: "pipe" });
    buildRepo(repo, ["--sign-key", "archive@example.org", "--gpg-homedir", gnupg()], next);
    const packages = readFileSync(path.join(repo, "dists/stable/main/binary-all/Packages"), "utf8");
    expect(packages.match(/^Version: .*$/gm)?.sort()).toEqual(["Version: 0.1.0-1", "Version: 0.1.1-1"]);
    const dir = path.join(work, "two-client");
    mkdirSync(dir);
    const client = apt(dir, `deb [signed-by=${path.join(repo, "ws-archive-keyring.gpg")}] file://${repo} stable main`);
    expect(client.get(["update"]).status).toBe(0);
    expect(client.cache(["policy", "ws-agent"]).stdout).toMatch(/Candidate: 0\.1\.1-1/);
  });
});
