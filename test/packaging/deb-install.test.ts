// The .deb installed into a real Debian root (debootstrap, minbase + nodejs + systemd), first as
// in an image build (a chroot: enabled, not started), then booted with systemd (systemd-nspawn):
// the service runs and reports to a real collector, remove leaves nothing running, purge leaves
// no config or state, and the golden-image script installs and verifies the package.
//
// Debian's own nodejs (18 in bookworm) runs the agent here: the package's "Node >= 18" promise.
import {
  existsSync,
  lstatSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
  copyFileSync,
  chmodSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { debianPackageVersion } from "../../packaging/deb/debian-version.mjs";
import { collectorBundle, eventually, freePort, repoRoot, start, type Proc } from "../support/process.js";
import { buildDeb, rootVersion } from "./lib/artifacts.js";
import { Container } from "./lib/container.js";
import { makeDebianRoot } from "./lib/debian-root.js";
import { requireCommand, run, runOk } from "./lib/tools.js";

const UNITS = ["ws-agent.service", "ws-agent-grow.service", "ws-agent-grow.path"];
const VM = { namespace: "packaging", name: "deb-install" };

let work: string;
let root: string;
let container: Container | undefined;
let collector: Proc | undefined;
let httpPort: number;
let grpcPort: number;

beforeAll(() => {
  requireCommand("chroot", "coreutils");
  requireCommand("systemd-analyze", "systemd");
  work = mkdtempSync(path.join(os.tmpdir(), "ws-deb-install-"));
  const deb = buildDeb(path.join(work, "out"));
  root = path.join(work, "root");
  makeDebianRoot(root, { include: ["nodejs", "systemd", "dbus"] });
  // /var/tmp, not /tmp: the booted system mounts a fresh tmpfs on /tmp.
  copyFileSync(deb, path.join(root, "var/tmp/ws-agent.deb"));
  copyFileSync(
    path.join(repoRoot, "packaging/golden-image/build.sh"),
    path.join(root, "var/tmp/golden-image-build.sh"),
  );
  chmodSync(path.join(root, "var/tmp/golden-image-build.sh"), 0o755);
}, 900_000);

afterAll(async () => {
  await container?.stop();
  await collector?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
}, 120_000);

function inChroot(...argv: string[]) {
  return run("chroot", [root, "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", ...argv]);
}

function inside(...argv: string[]) {
  if (!container) throw new Error("the container is not running (an earlier step failed)");
  return container.exec(argv);
}

function agentProcesses(): string[] {
  // The container's own /proc, read from inside: every command line that runs the agent.
  const listing = inside(
    "sh",
    "-c",
    "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done",
  ).stdout;
  return listing.split("\n").filter((line) => /ws-agent(\.cjs)? run/.test(line));
}

const at = (p: string) => path.join(root, p);

/** Command lines of the host's processes whose root directory is `dir` (chrooted into it). */
function processesRootedIn(dir: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      if (readlinkSync(`/proc/${pid}/root`) === dir)
        found.push(readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " "));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

describe("installing into a chroot (an image build: no systemd running)", () => {
  it("installs with dpkg: files, modes, the two names, the conffile", () => {
    const result = inChroot("dpkg", "-i", "/var/tmp/ws-agent.deb");
    expect(result.status, result.output).toBe(0);
    expect(inChroot("dpkg-query", "-W", "-f", "${Version} ${Status}", "ws-agent").stdout).toBe(
      `${debianPackageVersion(rootVersion)} install ok installed`,
    );
    expect(statSync(at("usr/lib/ws-agent/ws-agent.cjs")).mode & 0o7777).toBe(0o755);
    for (const name of ["ws-agent", "ws-lease"])
      expect(readlinkSync(at(`usr/bin/${name}`))).toBe("../lib/ws-agent/ws-agent.cjs");
    for (const unit of UNITS) expect(statSync(at(`lib/systemd/system/${unit}`)).mode & 0o7777, unit).toBe(0o644);
    expect(statSync(at("lib/udev/rules.d/99-ws-agent-grow.rules")).isFile()).toBe(true);
    expect(statSync(at("var/lib/ws-agent")).mode & 0o7777).toBe(0o700);
    expect(inChroot("dpkg-query", "-W", "-f", "${Conffiles}", "ws-agent").stdout).toMatch(
      /^ \/etc\/ws-agent\/config\.yaml [0-9a-f]{32}$/m,
    );
    const man = inChroot(
      "sh",
      "-c",
      "test -s /usr/share/man/man8/ws-agent.8.gz && test -s /usr/share/man/man1/ws-lease.1.gz",
    );
    expect(man.status, "man pages installed").toBe(0);
  });

  it("enables every unit (symlinks under multi-user.target.wants) and starts nothing", () => {
    for (const unit of UNITS) {
      const link = at(`etc/systemd/system/multi-user.target.wants/${unit}`);
      expect(lstatSync(link).isSymbolicLink(), unit).toBe(true);
      expect(readlinkSync(link)).toBe(`/lib/systemd/system/${unit}`);
      expect(inChroot("systemctl", "is-enabled", unit).stdout.trim(), unit).toBe("enabled");
    }
    expect(processesRootedIn(root)).toEqual([]);
  });

  it("passes systemd-analyze verify with every ExecStart resolvable in the installed root", () => {
    const result = run("systemd-analyze", [
      "verify",
      `--root=${root}`,
      ...[...UNITS, "run-ws-credential.mount"].map((u) => `/lib/systemd/system/${u}`),
    ]);
    expect(result.status, result.output).toBe(0);
    expect(result.stderr.trim(), result.output).toBe("");
  });

  it("runs on Debian's Node.js under both names", () => {
    const node = inChroot("node", "--version");
    expect(Number(/^v(\d+)\./.exec(node.stdout)?.[1]), node.output).toBeGreaterThanOrEqual(18);
    expect(inChroot("ws-agent", "version").stdout.trim()).toBe(`ws-agent ${rootVersion}`);
    const lease = inChroot("ws-lease", "--help");
    expect(lease.status, lease.output).toBe(0);
    expect(lease.stdout).toContain("ws-lease - keep this VM running");
  });
});

describe("booted with systemd", () => {
  beforeAll(async () => {
    container = await Container.boot(root, `ws-deb-${process.pid}`);
  }, 240_000);

  it("without a config the agent stops with exit status 3 (configuration), saying what is missing, and is not restarted", async () => {
    const show = await eventually(
      () => {
        const props = inside(
          "systemctl",
          "show",
          "ws-agent.service",
          "-p",
          "ActiveState",
          "-p",
          "ExecMainStatus",
          "-p",
          "NRestarts",
        ).stdout;
        return /ActiveState=failed/.test(props) ? props : undefined;
      },
      60_000,
      "ws-agent.service to fail for want of a config",
    );
    expect(show).toContain("ExecMainStatus=3");
    expect(show).toContain("NRestarts=0");
    const journal = inside("journalctl", "-u", "ws-agent.service", "--no-pager", "-o", "cat").stdout;
    expect(journal).toMatch(/no collector address: set collector\.address in \/etc\/ws-agent\/config\.yaml/);
  });

  it("with the config cloud-init writes, the service runs and reports to the collector", async () => {
    const keyFile = path.join(work, "token.key");
    writeFileSync(keyFile, runOk(process.execPath, [collectorBundle, "keygen"]).stdout, { mode: 0o600 });
    const token = runOk(process.execPath, [
      collectorBundle,
      "token",
      "--key-file",
      keyFile,
      "--namespace",
      VM.namespace,
      "--name",
      VM.name,
    ]).stdout.trim();
    grpcPort = await freePort();
    httpPort = await freePort();
    collector = start(collectorBundle, [
      "serve",
      "--standalone",
      "--grpc-listen",
      `127.0.0.1:${grpcPort}`,
      "--http-listen",
      `127.0.0.1:${httpPort}`,
      "--key-file",
      keyFile,
    ]);
    await collector.waitFor(/collector serving/);

    // What packaging/cloud-init/user-data.example.yaml writes, with a plaintext local collector.
    writeFileSync(at("etc/ws-agent/token"), `${token}\n`, { mode: 0o600 });
    writeFileSync(
      at("etc/ws-agent/config.yaml"),
      `collector:\n  address: 127.0.0.1:${grpcPort}\n  insecure: "true"\nvm:\n  namespace: ${VM.namespace}\n  name: ${VM.name}\ntokenFile: /etc/ws-agent/token\n`,
    );
    const restart = inside("systemctl", "restart", "ws-agent.service");
    expect(restart.status, restart.output).toBe(0);

    const vm = await eventually(
      async () => {
        const body = (await (await fetch(`http://127.0.0.1:${httpPort}/api/vms`)).json()) as {
          vms: Array<{ namespace: string; name: string; connected: boolean; agentVersion: string }>;
        };
        return body.vms.find((v) => v.namespace === VM.namespace && v.name === VM.name && v.connected);
      },
      60_000,
      `VM ${VM.namespace}/${VM.name} connected to the collector`,
    );
    expect(vm.agentVersion).toBe(rootVersion);
    expect(inside("systemctl", "is-active", "ws-agent.service").stdout.trim()).toBe("active");
    expect(agentProcesses().length).toBe(1);
    // The measured memory budget and the V8 heap cap under it reach the running agent.
    expect(inside("systemctl", "show", "ws-agent.service", "-p", "MemoryMax").stdout.trim()).toBe(
      `MemoryMax=${192 * 1024 * 1024}`,
    );
    const environ = inside(
      "sh",
      "-c",
      "tr '\\0' '\\n' < /proc/$(systemctl show -p MainPID --value ws-agent.service)/environ",
    ).stdout;
    expect(environ.split("\n")).toContain("NODE_OPTIONS=--max-old-space-size=96");
    // The unit's V8 flags (lite mode: ~10 MiB less RSS, docs/benchmarks.md) reach Debian's node.
    expect(agentProcesses()[0]).toContain(
      "/usr/bin/node --lite-mode --no-expose-wasm /usr/lib/ws-agent/ws-agent.cjs run",
    );
    // The lease socket answers under systemd's hardening (ProtectSystem=strict, RuntimeDirectory).
    const status = inside("ws-lease", "status");
    expect(status.status, status.output).toBe(0);
    expect(status.stdout).toMatch(/Collector:\s+connected/);
  });

  it("remove: the agent is stopped, nothing is left running, the edited config is kept", async () => {
    const result = inside("dpkg", "-r", "ws-agent");
    expect(result.status, result.output).toBe(0);
    expect(inside("systemctl", "is-active", "ws-agent.service").stdout.trim()).not.toBe("active");
    await eventually(() => agentProcesses().length === 0, 30_000, "no ws-agent process in the container");
    expect(existsSync(at("usr/lib/ws-agent/ws-agent.cjs"))).toBe(false);
    expect(existsSync(at("usr/bin/ws-lease"))).toBe(false);
    expect(readFileSync(at("etc/ws-agent/config.yaml"), "utf8")).toContain(VM.name);
    expect(inside("dpkg-query", "-W", "-f", "${Status}", "ws-agent").stdout).toBe("deinstall ok config-files");
  });

  it("purge: configuration (with the token), state and runtime files are gone, and so are the unit links", () => {
    const result = inside("dpkg", "-P", "ws-agent");
    expect(result.status, result.output).toBe(0);
    for (const dir of ["etc/ws-agent", "var/lib/ws-agent", "run/ws-agent"])
      expect(existsSync(at(dir)), dir).toBe(false);
    const wants = readdirSync(at("etc/systemd/system/multi-user.target.wants"));
    expect(wants.filter((name) => name.startsWith("ws-agent"))).toEqual([]);
    expect(inside("dpkg-query", "-W", "ws-agent").status).not.toBe(0);
  });

  it("the golden-image script installs and verifies the package on a running system", () => {
    const result = inside("/var/tmp/golden-image-build.sh", "--local", "--deb", "/var/tmp/ws-agent.deb", "--no-seal");
    expect(result.status, result.output).toBe(0);
    expect(result.stdout + result.stderr).toContain(
      `verified: ws-agent ${debianPackageVersion(rootVersion)} installed, probe works, units enabled`,
    );
    expect(result.stderr).toContain("NOT sealed (--no-seal)");
    for (const unit of UNITS) expect(inside("systemctl", "is-enabled", unit).stdout.trim(), unit).toBe("enabled");
  });
});
