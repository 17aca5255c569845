// packaging/golden-image/build.sh: shellcheck-clean, with a usage that says what it does and
// clear refusals. Its install-and-verify path runs for real in deb-install.test.ts (--local in a
// booted Debian); --ssh and --image need a VM or libguestfs, which this machine does not have,
// and --rpm's dnf install needs a dnf-based root, which a Debian machine cannot make: its
// refusal on an apt-based root is what runs here.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../support/process.js";
import { inOverlayRoot, requireOverlayRoot } from "./lib/overlay-root.js";
import { requireCommand, run, runOk } from "./lib/tools.js";

const script = path.join(repoRoot, "packaging/golden-image/build.sh");
let work: string;

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), "ws-golden-"));
});

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the golden-image script", () => {
  it("is clean for shellcheck", () => {
    requireCommand("shellcheck", "shellcheck");
    const result = run("shellcheck", ["--severity=style", script]);
    expect(result.status, result.output).toBe(0);
  });

  it("explains its three ways in --help, ending with the seal", () => {
    const result = run("bash", [script, "--help"]);
    expect(result.status, result.output).toBe(0);
    for (const phrase of [
      "--ssh USER@HOST",
      "--local",
      "--image",
      "Ubuntu 24.04",
      "ws-agent seal --yes --poweroff",
      "--no-seal",
      "--rpm ws-agent-<version>-1.noarch.rpm",
      "dnf-based",
    ]) {
      expect(result.stdout, phrase).toContain(phrase);
    }
  });

  it("refuses bad usage with status 2 and a reason", () => {
    for (const [args, reason] of [
      [[], /give --ssh USER@HOST, --local or --image FILE/],
      [["--local"], /--deb FILE \(or --rpm FILE for dnf-based images\) is required/],
      [["--local", "--deb", "a.deb", "--rpm", "a.rpm"], /give --deb or --rpm, not both/],
      [["--ssh"], /--ssh needs a value/],
      [["--frobnicate"], /unknown argument: --frobnicate/],
    ] as const) {
      const result = run("bash", [script, ...args]);
      expect(result.status, result.output).toBe(2);
      expect(result.stderr).toMatch(reason);
    }
  });

  it("refuses a file that is not the ws-agent package before touching anything", () => {
    const notDeb = path.join(work, "not-a.deb");
    writeFileSync(notDeb, "hello");
    const result = run("bash", [
      script,
      "--image",
      path.join(work, "missing.img"),
      "--output",
      path.join(work, "out.qcow2"),
      "--deb",
      notDeb,
    ]);
    expect(result.status, result.output).toBe(1);
    expect(result.stderr).toContain("not-a.deb is not a Debian package");
    const notRpm = run("bash", [script, "--local", "--rpm", notDeb]);
    expect(notRpm.status, notRpm.output).toBe(1);
    expect(notRpm.stderr).toContain("not-a.deb is not an rpm");
    const missing = run("bash", [script, "--local", "--deb", path.join(work, "absent.deb")]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain("absent.deb: no such file");
  });

  it("--rpm on an apt-based machine: refused by the install step, naming the right option", () => {
    requireOverlayRoot();
    requireCommand("rpmbuild", "rpm");
    const out = path.join(work, "rpm");
    runOk(process.execPath, [path.join(repoRoot, "scripts/build-rpm.mjs"), "--out", out]);
    const rpmFile = path.join(out, readdirSync(out).find((f) => f.endsWith(".rpm"))!);
    // In a scratch root (this machine's root under an overlay): nothing of the host changes.
    const result = inOverlayRoot(
      path.join(work, "scratch"),
      `chroot "$ROOT" bash ${script} --local --rpm ${rpmFile} --no-seal`,
    );
    expect(result.status, result.output).not.toBe(0);
    expect(result.stderr).toContain("==> installing ws-agent 0.1.0-1");
    expect(result.stderr).toContain("this image has no dnf: give the .deb (--deb) for apt-based images");
  }, 120_000);
});
