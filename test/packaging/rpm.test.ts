// The rpm as scripts/build-rpm.mjs builds it: rpmlint clean under packaging/rpm/rpmlint.toml,
// its metadata and files read with rpm -qp, and installed into a scratch root (this machine's
// root under an overlay) with `rpm --root`: the files land with their modes, the %post scriptlet
// enables the units, rpm -V is clean, the program runs from the installed tree, and erasing
// runs %preun (units disabled) and keeps a changed config as .rpmsave.
import { existsSync, lstatSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "../support/process.js";
import { rootVersion } from "./lib/artifacts.js";
import { inOverlayRoot, requireOverlayRoot } from "./lib/overlay-root.js";
import { requireCommand, run, runOk } from "./lib/tools.js";

let work: string;
let rpmFile: string;
const UNITS = ["ws-agent.service", "ws-agent-grow.service", "ws-agent-grow.path"];

beforeAll(() => {
  requireCommand("rpmbuild", "rpm");
  requireCommand("rpmlint", "rpmlint");
  requireCommand("dpkg-deb", "dpkg");
  work = mkdtempSync(path.join(os.tmpdir(), "ws-rpm-test-"));
  const out = runOk(process.execPath, [path.join(repoRoot, "scripts/build-rpm.mjs"), "--out", path.join(work, "out")]);
  const built = readdirSync(path.join(work, "out")).filter((f) => f.endsWith(".rpm"));
  if (built.length !== 1) throw new Error(`build-rpm made ${built.join(", ") || "nothing"}:\n${out.output}`);
  rpmFile = path.join(work, "out", built[0]!);
}, 180_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

const query = (format: string) => runOk("rpm", ["-qp", "--queryformat", format, rpmFile]).stdout;

describe("the rpm", () => {
  it("is rpmlint clean", () => {
    const result = run("rpmlint", ["-c", path.join(repoRoot, "packaging/rpm/rpmlint.toml"), rpmFile]);
    expect(result.stdout, result.output).toMatch(/0 errors, 0 warnings, 0 badness/);
    expect(result.status, result.output).toBe(0);
  });

  it("is ws-agent, noarch, versioned from package.json, needing nodejs 18 and systemd", () => {
    expect(path.basename(rpmFile)).toBe(`ws-agent-${rootVersion}-1.noarch.rpm`);
    expect(query("%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{LICENSE}")).toBe(
      `ws-agent ${rootVersion} 1 noarch Apache-2.0`,
    );
    const requires = runOk("rpm", ["-qp", "--requires", rpmFile]).stdout.split("\n");
    expect(requires).toContain("nodejs >= 18");
    expect(requires).toContain("systemd");
    expect(runOk("rpm", ["-qpc", rpmFile]).stdout.trim()).toBe("/etc/ws-agent/config.yaml");
  });

  it("holds the .deb's files at the RHEL family's paths", () => {
    const files = runOk("rpm", ["-qpl", rpmFile]).stdout.trim().split("\n").sort();
    expect(files).toEqual(
      [
        "/etc/ws-agent",
        "/etc/ws-agent/config.yaml",
        "/usr/bin/ws-agent",
        "/usr/bin/ws-lease",
        "/usr/lib/systemd/system/run-ws-credential.mount",
        "/usr/lib/systemd/system/ws-agent-grow.path",
        "/usr/lib/systemd/system/ws-agent-grow.service",
        "/usr/lib/systemd/system/ws-agent.service",
        "/usr/lib/udev/rules.d/99-ws-agent-grow.rules",
        "/usr/lib/ws-agent",
        "/usr/lib/ws-agent/ws-agent.cjs",
        "/usr/share/doc/ws-agent/README.md",
        "/usr/share/licenses/ws-agent/copyright",
        "/usr/share/man/man1/ws-lease.1.gz",
        "/usr/share/man/man8/ws-agent.8.gz",
        "/var/lib/ws-agent",
      ].sort(),
    );
  });

  it("installs into a scratch root with rpm --root: files, modes, scriptlets, verify, erase", () => {
    requireOverlayRoot();
    const dir = path.join(work, "scratch");
    const result = inOverlayRoot(
      dir,
      `R="$ROOT"
rpm --root "$R" --initdb
# --nodeps: the scratch root's nodejs is a Debian package, not in its rpm database.
rpm --root "$R" -i --nodeps ${rpmFile}
echo "installed: $(rpm --root "$R" -q ws-agent)"
for u in ${UNITS.join(" ")}; do [ -L "$R/etc/systemd/system/multi-user.target.wants/$u" ] && echo "enabled: $u"; done
stat -c 'mode: %a %U %n' "$R/var/lib/ws-agent" "$R/usr/lib/ws-agent/ws-agent.cjs" "$R/etc/ws-agent/config.yaml"
head -1 "$R/usr/lib/ws-agent/ws-agent.cjs"
chroot "$R" /usr/bin/ws-agent version
chroot "$R" /usr/bin/ws-lease --help | head -1
rpm --root "$R" -V --nodeps ws-agent && echo "verify: clean"
echo "# changed by the admin" >> "$R/etc/ws-agent/config.yaml"
rpm --root "$R" -e ws-agent
echo "erased: $(rpm --root "$R" -q ws-agent || true)"
for u in ${UNITS.join(" ")}; do [ -e "$R/etc/systemd/system/multi-user.target.wants/$u" ] && echo "still enabled: $u"; done
[ -e "$R/usr/bin/ws-agent" ] && echo "left: /usr/bin/ws-agent"
[ -f "$R/etc/ws-agent/config.yaml.rpmsave" ] && echo "saved: config.yaml.rpmsave"
true`,
    );
    expect(result.status, result.output).toBe(0);
    const out = result.stdout;
    expect(out).toContain(`installed: ws-agent-${rootVersion}-1.noarch`);
    for (const unit of UNITS) expect(out, unit).toContain(`enabled: ${unit}`);
    expect(out).toMatch(/^mode: 700 root .*\/var\/lib\/ws-agent$/m);
    expect(out).toMatch(/^mode: 755 root .*\/usr\/lib\/ws-agent\/ws-agent\.cjs$/m);
    expect(out).toMatch(/^mode: 644 root .*\/etc\/ws-agent\/config\.yaml$/m);
    expect(out).toContain("#!/usr/bin/node\n");
    expect(out).toContain(`ws-agent ${rootVersion}`);
    expect(out).toContain("verify: clean");
    expect(out).toContain("erased: package ws-agent is not installed");
    expect(out).not.toContain("still enabled");
    expect(out).not.toContain("left:");
    expect(out).toContain("saved: config.yaml.rpmsave");
    // The host's own root is untouched.
    expect(existsSync("/usr/lib/ws-agent")).toBe(false);
    expect(lstatSync(path.join(dir, "upper")).isDirectory()).toBe(true);
  }, 300_000);
});
