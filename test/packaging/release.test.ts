// The release tarball and checksums scripts/build-release.mjs makes from the other builders'
// artifacts: its exact listing, SHA256SUMS that sha256sum -c accepts (inside the tarball and
// beside the artifacts), the single executable and the bundle running from the unpacked tree,
// and `npm run package:all` running every builder.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../support/process.js";
import { buildDeb, buildSea, rootVersion } from "./lib/artifacts.js";
import { requireCommand, runOk } from "./lib/tools.js";

let work: string;
let dist: string;
const name = `ws-agent-${rootVersion}`;

beforeAll(() => {
  requireCommand("sha256sum", "coreutils");
  requireCommand("rpmbuild", "rpm");
  work = mkdtempSync(path.join(os.tmpdir(), "ws-release-"));
  dist = path.join(work, "dist");
  mkdirSync(dist);
  buildDeb(dist);
  runOk(process.execPath, [path.join(repoRoot, "scripts/build-rpm.mjs"), "--out", dist]);
  buildSea(path.join(dist, "ws-agent-linux-x64"));
  runOk(process.execPath, [path.join(repoRoot, "scripts/build-release.mjs"), "--dist", dist]);
  runOk("tar", ["-xzf", path.join(dist, `${name}-linux-x64.tar.gz`), "-C", work]);
}, 600_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the release", () => {
  it("tarball: the executable, the bundle, the units, the config and docs, and their checksums", () => {
    const listing = runOk("tar", ["-tvzf", path.join(dist, `${name}-linux-x64.tar.gz`)])
      .stdout.trim()
      .split("\n");
    expect(listing.map((l) => l.split(/\s+/).at(-1)).filter((f) => !f!.endsWith("/"))).toEqual([
      `${name}/README.md`,
      `${name}/SHA256SUMS`,
      `${name}/bin/ws-agent`,
      `${name}/config.yaml`,
      `${name}/copyright`,
      `${name}/lib/ws-agent.cjs`,
      `${name}/systemd/99-ws-agent-grow.rules`,
      `${name}/systemd/run-ws-credential.mount`,
      `${name}/systemd/ws-agent-grow.path`,
      `${name}/systemd/ws-agent-grow.service`,
      `${name}/systemd/ws-agent.service`,
    ]);
    for (const line of listing) expect(line, line).toMatch(/^\S+ 0\/0 /); // root-owned, numerically
    expect(listing.find((l) => l.endsWith("/bin/ws-agent"))).toMatch(/^-rwxr-xr-x/);
  });

  it("SHA256SUMS check, inside the tarball and beside the artifacts", () => {
    const inside = runOk("sha256sum", ["-c", "SHA256SUMS"], { cwd: path.join(work, name) }).stdout;
    expect(inside).toContain("bin/ws-agent: OK");
    expect(inside.trim().split("\n")).toHaveLength(10);
    const beside = runOk("sha256sum", ["-c", "SHA256SUMS"], { cwd: dist }).stdout.trim().split("\n");
    expect(beside.sort()).toEqual(
      [
        `${name}-1.noarch.rpm: OK`,
        `${name}-linux-x64.tar.gz: OK`,
        "ws-agent-linux-x64: OK",
        `ws-agent_${rootVersion}-1_all.deb: OK`,
      ].sort(),
    );
    // A changed artifact fails the check.
    copyFileSync(path.join(dist, `ws-agent_${rootVersion}-1_all.deb`), path.join(work, "deb.bak"));
    const tampered = path.join(dist, `${name}-1.noarch.rpm`);
    const original = readFileSync(tampered);
    try {
      rmSync(tampered);
      copyFileSync(path.join(work, "deb.bak"), tampered);
      expect(() => runOk("sha256sum", ["-c", "--quiet", "SHA256SUMS"], { cwd: dist })).toThrow(/FAILED/);
    } finally {
      rmSync(tampered);
      writeFileSync(tampered, original);
    }
  });

  it("runs from the unpacked tree: the executable without Node.js flags, the bundle under node", () => {
    expect(runOk(path.join(work, name, "bin/ws-agent"), ["version"]).stdout.trim()).toBe(`ws-agent ${rootVersion}`);
    expect(runOk(process.execPath, [path.join(work, name, "lib/ws-agent.cjs"), "version"]).stdout.trim()).toBe(
      `ws-agent ${rootVersion}`,
    );
  });

  it("npm run package:all runs every builder, the release last", () => {
    const script = (
      JSON.parse(readFileSync(path.join(repoRoot, "package.json"), "utf8")) as { scripts: Record<string, string> }
    ).scripts["package:all"]!;
    expect(script.split(" && ")).toEqual([
      "node scripts/build.mjs",
      "node scripts/build-deb.mjs",
      "node scripts/build-rpm.mjs",
      "node scripts/build-sea.mjs",
      "node scripts/build-release.mjs",
    ]);
  });
});
