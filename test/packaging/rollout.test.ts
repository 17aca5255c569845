// The one-shot rollout into a VM that already exists: packaging/rollout/ws-agent-bootstrap.sh run
// as root in a guest-like root — this machine's own Debian root under an overlay (a private
// mount namespace, so nothing of the host changes) — against the signed apt repository that
// scripts/build-apt-repo.mjs lays out. The real apt, dpkg and the package's maintainer scripts
// run; then ws-agent is installed, the source is signed-by the repository key, and
// unattended-upgrades is told to upgrade origin ws.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../support/process.js";
import { buildDeb, rootVersion } from "./lib/artifacts.js";
import { inOverlayRoot, requireOverlayRoot } from "./lib/overlay-root.js";
import { requireCommand, run, runOk } from "./lib/tools.js";

let work: string;
let repo: string;
let fingerprint: string;
const bootstrap = path.join(repoRoot, "packaging/rollout/ws-agent-bootstrap.sh");

beforeAll(() => {
  requireOverlayRoot();
  for (const [command, pkg] of [
    ["gpg", "gpg"],
    ["curl", "curl"],
    ["shellcheck", "shellcheck"],
  ] as const)
    requireCommand(command, pkg);
  if (process.getuid?.() !== 0)
    throw new Error("the rollout test mounts an overlay and chroots: run it as root (CI does)");
  work = mkdtempSync(path.join(os.tmpdir(), "ws-rollout-"));
  chmodSync(work, 0o755); // apt reads file:// repositories as its sandbox user _apt
  const deb = buildDeb(path.join(work, "out"));
  const gnupg = path.join(work, "gnupg");
  mkdirSync(gnupg, { mode: 0o700 });
  runOk("gpg", [
    "--batch",
    "--homedir",
    gnupg,
    "--passphrase",
    "",
    "--quick-gen-key",
    "ws rollout test <rollout@example.org>",
    "ed25519",
    "sign",
    "1d",
  ]);
  fingerprint = /^fpr:+([0-9A-F]+):/m.exec(
    runOk("gpg", ["--homedir", gnupg, "--with-colons", "--list-keys"]).stdout,
  )![1]!;
  repo = path.join(work, "repo");
  runOk(process.execPath, [
    path.join(repoRoot, "scripts/build-apt-repo.mjs"),
    "--deb",
    deb,
    "--out",
    repo,
    "--sign-key",
    "rollout@example.org",
    "--gpg-homedir",
    gnupg,
  ]);
}, 180_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

const inGuest = (name: string, script: string) => inOverlayRoot(path.join(work, name), script);

describe("ws-agent-bootstrap.sh", () => {
  it("passes shellcheck", () => {
    const result = run("shellcheck", ["-s", "sh", bootstrap]);
    expect(result.stdout + result.stderr).toBe("");
    expect(result.status).toBe(0);
  });

  it("installs ws-agent from the signed repository, and a second run is a no-op upgrade", () => {
    const result = inGuest(
      "guest",
      `chroot "$ROOT" sh ${bootstrap} --repo file://${repo} --key-fingerprint ${fingerprint}
chroot "$ROOT" sh ${bootstrap} --repo file://${repo}
chroot "$ROOT" apt-config dump Unattended-Upgrade::Origins-Pattern
chroot "$ROOT" dpkg-query -W -f '\${Version} \${Status}\\n' ws-agent`,
    );
    expect(result.status, result.output).toBe(0);
    expect(result.stdout).toContain(`ws-agent ${rootVersion}`);
    expect(result.stdout).toMatch(/Unattended-Upgrade::Origins-Pattern:: "origin=ws";/);
    expect(result.stdout).toMatch(/^0\.1\.0-1 install ok installed$/m);
    const upper = path.join(work, "guest/upper");
    expect(readFileSync(path.join(upper, "etc/apt/sources.list.d/ws.sources"), "utf8")).toContain(
      "Signed-By: /usr/share/keyrings/ws-archive-keyring.gpg",
    );
    expect(existsSync(path.join(upper, "usr/bin/ws-agent"))).toBe(true);
    expect(existsSync("/usr/bin/ws-agent")).toBe(false); // the host is untouched
  }, 300_000);

  it("refuses a repository whose key is not the fingerprint given", () => {
    const result = inGuest(
      "wrong-key",
      `chroot "$ROOT" sh ${bootstrap} --repo file://${repo} --key-fingerprint 0000000000000000000000000000000000000000`,
    );
    expect(result.status).not.toBe(0);
    expect(result.output).toContain("the repository key is not 0000000000000000000000000000000000000000: refusing it");
    expect(existsSync(path.join(work, "wrong-key/upper/etc/apt/sources.list.d/ws.sources"))).toBe(false);
  }, 120_000);
});
