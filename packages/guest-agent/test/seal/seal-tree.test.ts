// ws-agent seal --root over a tree that looks like a booted Ubuntu cloud VM (ubuntu-tree.ts),
// then reading the tree itself; and a dry run on this machine's own root.
import { execFile } from "node:child_process";
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { cleanArguments, parseCleanHelp } from "../../src/seal/cloud-init.js";
import { sealCommand } from "../../src/seal/command.js";
import { REGENERATE_UNIT_LINK, REGENERATE_UNIT_PATH, REGENERATE_UNIT_TEXT } from "../../src/seal/ssh.js";
import { buildUbuntuCloudTree, hashTree } from "./ubuntu-tree.js";

const execFileAsync = promisify(execFile);
let work: string;
const cleanups: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), "ws-seal-"));
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

interface Tree {
  root: string;
  outside: string;
}

let treeCount = 0;
async function newTree(options: { networkConfigDisabled?: boolean } = {}): Promise<Tree> {
  treeCount += 1;
  const root = path.join(work, `root-${treeCount}`);
  const outside = path.join(work, `outside-${treeCount}`);
  await mkdir(root, { recursive: true });
  await mkdir(outside, { recursive: true });
  await writeFile(path.join(outside, "sentinel.log"), "host file, not the image's\n");
  await buildUbuntuCloudTree(root, { ...options, outside });
  return { root, outside };
}

function capture() {
  let stdout = "";
  let stderr = "";
  const stream = (append: (text: string) => void) =>
    ({
      write(chunk: string | Uint8Array) {
        append(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString());
        return true;
      },
    }) as unknown as NodeJS.WritableStream;
  return {
    io: { stdout: stream((t) => (stdout += t)), stderr: stream((t) => (stderr += t)), env: process.env },
    stdout: () => stdout,
    stderr: () => stderr,
  };
}

interface JsonReport {
  root: string;
  live: boolean;
  dryRun: boolean;
  ok: boolean;
  poweroff: string;
  operations: Array<{
    id: string;
    status: string;
    skipped: string | null;
    problems: string[];
    notes: string[];
    actions: Array<{
      kind: string;
      path?: string;
      argv?: string[];
      status: string;
      error: string | null;
      description: string;
    }>;
  }>;
  verification: Array<{ id: string; ok: boolean; detail: string }> | null;
}

async function seal(args: string[]): Promise<{ code: number; report: JsonReport; stderr: string }> {
  const out = capture();
  const code = await sealCommand([...args, "--json"], out.io);
  return { code, report: out.stdout() ? JSON.parse(out.stdout()) : null, stderr: out.stderr() };
}

const exists = (file: string) =>
  lstat(file).then(
    () => true,
    () => false,
  );
const entries = (dir: string) =>
  readdir(dir).then(
    (names) => names.sort(),
    () => null,
  );
const operation = (report: JsonReport, id: string) => report.operations.find((op) => op.id === id)!;

describe("ws-agent seal --root on an Ubuntu cloud VM tree", () => {
  it("--dry-run prints the plan and leaves the tree byte-identical", async () => {
    const { root } = await newTree();
    const before = await hashTree(root);
    const { code, report } = await seal(["--root", root, "--dry-run"]);
    expect(code).toBe(0);
    expect(report).toMatchObject({ root, live: false, dryRun: true, verification: null, ok: true });
    expect(operation(report, "ssh-host-keys").actions.map((a) => a.path)).toContain("/etc/ssh/ssh_host_ed25519_key");
    expect(operation(report, "machine-id").actions.map((a) => a.description)).toEqual([
      "write /etc/machine-id (uninitialized: systemd makes a new one on first boot)",
      "remove /var/lib/dbus/machine-id",
    ]);
    expect(operation(report, "cloud-init-clean")).toMatchObject({
      status: "skipped",
      skipped: expect.stringMatching(/offline tree/),
    });
    expect(report.operations.every((op) => ["planned", "skipped", "nothing-to-do"].includes(op.status))).toBe(true);

    const text = capture();
    expect(await sealCommand(["--root", root, "--dry-run"], text.io)).toBe(0);
    expect(text.stdout()).toMatch(/^ws-agent seal: offline tree .*\ndry run: nothing is changed/);
    expect(text.stdout()).toContain("    would remove /var/lib/cloud/instance\n");
    expect(await hashTree(root)).toBe(before);
  });

  it("refuses without --yes, says why, and changes nothing", async () => {
    const { root } = await newTree();
    const before = await hashTree(root);
    const out = capture();
    expect(await sealCommand(["--root", root], out.io)).toBe(2);
    expect(out.stdout()).toBe("");
    expect(out.stderr()).toMatch(/refusing without --yes/);
    expect(out.stderr()).toMatch(/--dry-run/);
    expect(await hashTree(root)).toBe(before);
  });

  it("--yes seals everything, verifies it, and a second run finds nothing to do", async () => {
    const { root, outside } = await newTree();
    const oldFingerprint = (
      await execFileAsync("ssh-keygen", ["-l", "-f", path.join(root, "etc/ssh/ssh_host_ed25519_key.pub")])
    ).stdout;
    const { code, report } = await seal(["--root", root, "--yes"]);
    expect(code, JSON.stringify(report, null, 2)).toBe(0);
    expect(report.ok).toBe(true);
    expect(report.verification!.map((check) => [check.id, check.ok])).toEqual([
      ["machine-id", true],
      ["dbus-machine-id", true],
      ["ssh-host-keys", true],
      ["ssh-host-key-regeneration", true],
      ["netplan-mac-match", true],
      ["cloud-init-state", true],
      ["agent-state", true],
    ]);

    // Identity.
    expect(await readFile(path.join(root, "etc/machine-id"), "utf8")).toBe("uninitialized\n");
    expect((await stat(path.join(root, "etc/machine-id"))).mode & 0o777).toBe(0o444);
    expect(await exists(path.join(root, "var/lib/dbus/machine-id"))).toBe(false);
    expect((await entries(path.join(root, "etc/ssh")))!.filter((n) => n.startsWith("ssh_host_"))).toEqual([]);
    expect(await exists(path.join(root, "etc/ssh/sshd_config.d/50-cloud-init.conf"))).toBe(false);

    // First-boot key generation: a real unit systemd accepts, enabled.
    expect(await readFile(path.join(root, REGENERATE_UNIT_PATH), "utf8")).toBe(REGENERATE_UNIT_TEXT);
    expect(await readlink(path.join(root, REGENERATE_UNIT_LINK))).toBe(REGENERATE_UNIT_PATH);
    await execFileAsync("systemd-analyze", ["verify", path.join(root, REGENERATE_UNIT_PATH)]).catch(
      (error: { stderr?: string }) => {
        throw new Error(
          `systemd-analyze verify rejected the unit (Debian package systemd): ${error.stderr ?? String(error)}`,
        );
      },
    );

    // Network: cloud-init's rendered file goes (it writes a new one on the clone's first boot);
    // the builder's file matches by name now, comments and other settings kept.
    expect(await exists(path.join(root, "etc/netplan/50-cloud-init.yaml"))).toBe(false);
    const builder = await readFile(path.join(root, "etc/netplan/01-builder.yaml"), "utf8");
    expect(builder).toMatch(/^# Written when the golden VM was built, not by cloud-init\.\n/);
    expect(parseYaml(builder)).toEqual({
      network: {
        version: 2,
        renderer: "networkd",
        ethernets: { id0: { match: { name: "e*" } }, lan: { match: { name: "enp2s0" }, mtu: 1450, dhcp4: true } },
        bridges: { br0: { interfaces: ["id0"], dhcp4: true } },
      },
    });
    expect((await stat(path.join(root, "etc/netplan/01-builder.yaml"))).mode & 0o777).toBe(0o600);

    // cloud-init: state gone but the seed; logs gone.
    expect(await entries(path.join(root, "var/lib/cloud"))).toEqual(["seed"]);
    expect(await exists(path.join(root, "var/lib/cloud/seed/nocloud/meta-data"))).toBe(true);
    expect(await exists(path.join(root, "var/log/cloud-init.log"))).toBe(false);
    expect(await exists(path.join(root, "var/log/cloud-init-output.log"))).toBe(false);

    // Logs truncated, rotated ones removed, journal emptied; symlinks left alone and not followed.
    expect((await stat(path.join(root, "var/log/syslog"))).size).toBe(0);
    expect((await stat(path.join(root, "var/log/syslog"))).mode & 0o777).toBe(0o640);
    expect((await stat(path.join(root, "var/log/wtmp"))).size).toBe(0);
    expect((await stat(path.join(root, "var/log/apt/history.log"))).size).toBe(0);
    expect(await exists(path.join(root, "var/log/syslog.1"))).toBe(false);
    expect(await exists(path.join(root, "var/log/syslog.2.gz"))).toBe(false);
    expect(await entries(path.join(root, "var/log/journal"))).toEqual([]);
    expect(await readFile(path.join(outside, "sentinel.log"), "utf8")).toBe("host file, not the image's\n");

    // People, tmp, agent, seeds, leases.
    for (const file of [
      "root/.bash_history",
      "root/.lesshst",
      "home/ubuntu/.bash_history",
      "home/ubuntu/.python_history",
      "home/ubuntu/.local/share/fish/fish_history",
      "home/admin/.bash_history",
    ]) {
      expect(await exists(path.join(root, file)), file).toBe(false);
    }
    expect(await exists(path.join(root, "home/ubuntu/.ssh/authorized_keys"))).toBe(true);
    expect(await entries(path.join(root, "tmp"))).toEqual([]);
    expect(await entries(path.join(root, "var/tmp"))).toEqual([]);
    expect(await entries(outside)).toEqual(["sentinel.log"]);
    expect(await entries(path.join(root, "var/lib/ws-agent"))).toEqual([]);
    expect(await exists(path.join(root, "etc/ws-agent/config.yaml"))).toBe(true);
    expect(operation(report, "agent-state").notes[0]).toMatch(/kept \/etc\/ws-agent\/config\.yaml/);
    expect(await exists(path.join(root, "var/lib/systemd/random-seed"))).toBe(false);
    expect(await exists(path.join(root, "var/lib/systemd/credential.secret"))).toBe(false);
    expect(await entries(path.join(root, "var/lib/dhcp"))).toEqual([]);

    // What the unit does on the clone's first boot makes different keys.
    await execFileAsync("ssh-keygen", ["-A", "-f", root]);
    const newFingerprint = (
      await execFileAsync("ssh-keygen", ["-l", "-f", path.join(root, "etc/ssh/ssh_host_ed25519_key.pub")])
    ).stdout;
    expect(newFingerprint).not.toBe(oldFingerprint);
    await rm(path.join(root, "etc/ssh"), { recursive: true, force: true }).then(() =>
      mkdir(path.join(root, "etc/ssh")),
    );

    const before = await hashTree(root);
    const again = await seal(["--root", root, "--yes"]);
    expect(again.code, JSON.stringify(again.report, null, 2)).toBe(0);
    expect(
      again.report.operations.filter((op) => op.status !== "nothing-to-do").map((op) => [op.id, op.status]),
    ).toEqual([["cloud-init-clean", "skipped"]]);
    expect(await hashTree(root)).toBe(before);
  });

  it("keeps cloud-init's netplan file when its network config is disabled, rewriting its MAC match instead", async () => {
    const { root } = await newTree({ networkConfigDisabled: true });
    const { code, report } = await seal(["--root", root, "--yes"]);
    expect(code, JSON.stringify(report, null, 2)).toBe(0);
    const rewritten = await readFile(path.join(root, "etc/netplan/50-cloud-init.yaml"), "utf8");
    expect(parseYaml(rewritten)).toEqual({ network: { version: 2, ethernets: { enp1s0: { dhcp4: true } } } });
    // cloud-init's 4-space layout and header comment survive.
    expect(rewritten).toContain(
      "# network: {config: disabled}\nnetwork:\n    version: 2\n    ethernets:\n        enp1s0:\n            dhcp4: true\n",
    );
    expect(operation(report, "cloud-init-generated-config").notes[0]).toMatch(
      /^kept \/etc\/netplan\/50-cloud-init\.yaml: cloud-init's network config is disabled/,
    );
  });

  it("reports a step that fails (a directory where /etc/machine-id should be) and does all the others", async () => {
    const { root } = await newTree();
    await rm(path.join(root, "etc/machine-id"));
    await mkdir(path.join(root, "etc/machine-id"));
    const { code, report } = await seal(["--root", root, "--yes"]);
    expect(code).toBe(1);
    expect(report.ok).toBe(false);
    const machineId = operation(report, "machine-id");
    expect(machineId.status).toBe("failed");
    expect(machineId.actions[0]).toMatchObject({
      path: "/etc/machine-id",
      status: "failed",
      error: expect.stringMatching(/EISDIR|ENOTEMPTY|EEXIST|directory/i),
    });
    expect(machineId.actions[1]).toMatchObject({ path: "/var/lib/dbus/machine-id", status: "done" });
    expect(report.operations.filter((op) => op.status === "failed").map((op) => op.id)).toEqual(["machine-id"]);
    expect(report.verification!.filter((check) => !check.ok).map((check) => check.id)).toEqual(["machine-id"]);
    expect((await entries(path.join(root, "etc/ssh")))!.filter((n) => n.startsWith("ssh_host_"))).toEqual([]);
    expect(await entries(path.join(root, "var/lib/cloud"))).toEqual(["seed"]);

    const text = capture();
    expect(await sealCommand(["--root", root, "--yes"], text.io)).toBe(1);
    expect(text.stdout()).toMatch(/\[FAILED\] machine-id\n {4}FAILED write \/etc\/machine-id/);
    expect(text.stdout()).toMatch(/ {4}FAILED machine-id: \/etc\/machine-id is missing or not a file/);
    expect(text.stdout()).toMatch(/summary: .*1 FAILED.* — NOT sealed/);
  });

  it("reports an immutable file (chattr +i) it cannot remove, and does all the others", async () => {
    const { root } = await newTree();
    const history = path.join(root, "root/.bash_history");
    try {
      await execFileAsync("chattr", ["+i", history]);
    } catch (error) {
      throw new Error(
        `chattr +i failed (Debian package e2fsprogs; the temp filesystem must support it): ${(error as { stderr?: string }).stderr ?? error}`,
      );
    }
    cleanups.push(() => execFileAsync("chattr", ["-i", history]).catch(() => undefined));
    const { code, report } = await seal(["--root", root, "--yes"]);
    expect(code).toBe(1);
    const histories = operation(report, "shell-history");
    expect(histories.status).toBe("failed");
    expect(histories.actions.find((a) => a.path === "/root/.bash_history")).toMatchObject({
      status: "failed",
      error: expect.stringMatching(/EPERM/),
    });
    expect(histories.actions.filter((a) => a.status === "done").map((a) => a.path)).toContain(
      "/home/ubuntu/.bash_history",
    );
    expect(report.operations.filter((op) => op.status === "failed").map((op) => op.id)).toEqual(["shell-history"]);
    // Histories are not a verification item, but the run still fails because a step did.
    expect(report.verification!.every((check) => check.ok)).toBe(true);
    expect(await readFile(path.join(root, "etc/machine-id"), "utf8")).toBe("uninitialized\n");
  });
});

describe("ws-agent seal usage", () => {
  it.each([
    [["--bogus"], /unknown option --bogus/],
    [["--root"], /--root needs a value/],
    [["--root", "/nonexistent-ws-seal-root", "--dry-run"], /--root \/nonexistent-ws-seal-root: ENOENT/],
    [["--root", "/etc/hostname", "--dry-run"], /not a directory/],
    [["--root", "/tmp", "--poweroff", "--yes"], /does not go with --root/],
    [["--poweroff", "--dry-run"], /does not go with --dry-run/],
    [["extra"], /unexpected argument "extra"/],
  ])("%j is a usage error (exit 2)", async (args, message) => {
    const out = capture();
    expect(await sealCommand(args, out.io)).toBe(2);
    expect(out.stderr()).toMatch(message);
    expect(out.stdout()).toBe("");
  });

  it("--help explains every option", async () => {
    const out = capture();
    expect(await sealCommand(["--help"], out.io)).toBe(0);
    for (const option of ["--root DIR", "--dry-run", "--yes", "--poweroff", "--json"])
      expect(out.stdout()).toContain(option);
  });
});

describe("ws-agent seal --dry-run on this machine's own root", () => {
  it("plans the real cloud-init clean with the flags its --help lists, and changes nothing", async () => {
    const watched = ["/etc/machine-id", "/etc/ssh/ssh_host_ed25519_key", "/var/lib/dbus/machine-id"];
    const before = await Promise.all(
      watched.map((file) =>
        lstat(file).then(
          (s) => `${s.mtimeMs}:${s.size}`,
          () => "absent",
        ),
      ),
    );
    const { code, report } = await seal(["--dry-run"]);
    expect(report, "no report").not.toBeNull();
    expect(report.live).toBe(true);
    expect([0, 1]).toContain(code);
    const help = (
      await execFileAsync("/usr/bin/cloud-init", ["clean", "--help"]).catch(() => {
        throw new Error("cloud-init is not installed: install the Debian package cloud-init");
      })
    ).stdout;
    const clean = operation(report, "cloud-init-clean");
    expect(clean.status).toBe("planned");
    const flags = parseCleanHelp(help);
    // The network part depends on whether this machine's cloud-init writes network config.
    expect([cleanArguments(flags, false), cleanArguments(flags, true)]).toContainEqual(
      clean.actions[0]!.argv!.slice(1),
    );
    expect(clean.actions[0]!.argv!.slice(0, 4)).toEqual(["/usr/bin/cloud-init", "clean", "--logs", "--machine-id"]);
    expect(clean.actions[0]!.status).toBe("planned");
    const after = await Promise.all(
      watched.map((file) =>
        lstat(file).then(
          (s) => `${s.mtimeMs}:${s.size}`,
          () => "absent",
        ),
      ),
    );
    expect(after).toEqual(before);
  });
});
