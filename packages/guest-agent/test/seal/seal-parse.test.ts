// Pure parts of seal: cloud-init --help and configuration, netplan rewriting, the key unit,
// in-root path resolution, and the planner's choices for the running system.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { cleanArguments, parseCleanHelp, readCloudInitSettings } from "../../src/seal/cloud-init.js";
import type { SealFacts } from "../../src/seal/facts.js";
import { macMatchedInterfaces, rewriteMacMatches } from "../../src/seal/netplan.js";
import { planSeal } from "../../src/seal/plan.js";
import { resolveInRoot } from "../../src/seal/rootfs.js";
import { REGENERATE_UNIT_TEXT, unitRegeneratesHostKeys } from "../../src/seal/ssh.js";
import { verifySeal } from "../../src/seal/verify.js";
import { sealFixtures } from "./ubuntu-tree.js";

const execFileAsync = promisify(execFile);
const fixture = (name: string) => readFileSync(path.join(sealFixtures, name), "utf8");

describe("cloud-init clean --help", () => {
  it("Debian 12's cloud-init 22.4 has --logs and --machine-id but no --configs", () => {
    expect(parseCleanHelp(fixture("cloud-init-22.4-clean-help.txt"))).toEqual({
      logs: true,
      machineId: true,
      seed: true,
      configs: null,
    });
    expect(cleanArguments(parseCleanHelp(fixture("cloud-init-22.4-clean-help.txt")), false)).toEqual([
      "clean",
      "--logs",
      "--machine-id",
    ]);
  });

  it("cloud-init 23.4+ lists the --configs choices; network config is held back only when nothing would rewrite it", () => {
    const flags = parseCleanHelp(fixture("cloud-init-24.1-clean-help.txt"));
    expect(flags).toEqual({ logs: true, machineId: true, seed: true, configs: ["all", "ssh_config", "network"] });
    expect(cleanArguments(flags, false)).toEqual(["clean", "--logs", "--machine-id", "--configs", "all"]);
    expect(cleanArguments(flags, true)).toEqual(["clean", "--logs", "--machine-id", "--configs", "ssh_config"]);
  });

  it("reads the real installed cloud-init's --help the same way", async () => {
    const run = (args: string[]) =>
      execFileAsync("/usr/bin/cloud-init", args).catch((error: unknown) => {
        throw new Error(`cloud-init did not run (install the Debian package cloud-init): ${String(error)}`);
      });
    const help = (await run(["clean", "--help"])).stdout;
    const version = `${(await run(["--version"])).stdout}${(await run(["--version"])).stderr}`;
    const flags = parseCleanHelp(help);
    expect(flags.logs).toBe(true);
    expect(flags.machineId).toBe(true);
    expect(flags.configs !== null).toBe(help.includes("--configs"));
    // On the version the fixture was captured from, the output is the fixture.
    if (version.includes(" 22.4.")) expect(help).toBe(fixture("cloud-init-22.4-clean-help.txt"));
  });

  it("an unknown help text offers nothing", () => {
    expect(parseCleanHelp("usage: cloud-init [-h]\n")).toEqual({
      logs: false,
      machineId: false,
      seed: false,
      configs: null,
    });
    expect(cleanArguments(parseCleanHelp(""), false)).toEqual(["clean"]);
  });
});

describe("cloud-init configuration", () => {
  const cloudCfg = { path: "/etc/cloud/cloud.cfg", text: fixture("cloud/cloud.cfg") };

  it("Debian's cloud.cfg: network config on, the ssh module regenerates host keys", () => {
    expect(
      readCloudInitSettings([
        cloudCfg,
        { path: "/etc/cloud/cloud.cfg.d/05_logging.cfg", text: fixture("cloud/05_logging.cfg") },
      ]),
    ).toEqual({
      networkConfigDisabled: false,
      regeneratesHostKeys: true,
      problems: [],
    });
  });

  it("99-disable-network-config.cfg turns network config off; ssh_deletekeys: false stops key regeneration", () => {
    const disabled = {
      path: "/etc/cloud/cloud.cfg.d/99-disable-network-config.cfg",
      text: fixture("cloud/99-disable-network-config.cfg"),
    };
    expect(readCloudInitSettings([cloudCfg, disabled]).networkConfigDisabled).toBe(true);
    expect(
      readCloudInitSettings([cloudCfg, { path: "/etc/cloud/cloud.cfg.d/90-keys.cfg", text: "ssh_deletekeys: false\n" }])
        .regeneratesHostKeys,
    ).toBe(false);
  });

  it("a broken file is reported, not fatal", () => {
    const settings = readCloudInitSettings([
      cloudCfg,
      { path: "/etc/cloud/cloud.cfg.d/bad.cfg", text: "network: [unclosed\n" },
    ]);
    expect(settings.problems).toHaveLength(1);
    expect(settings.problems[0]).toMatch(/^\/etc\/cloud\/cloud\.cfg\.d\/bad\.cfg: /);
  });
});

describe("netplan MAC matches", () => {
  it("cloud-init's rendering (match macaddress + set-name) becomes the seed guide's DHCP by name, comments kept", () => {
    const original = fixture("netplan/50-cloud-init.yaml");
    expect(macMatchedInterfaces(original)).toEqual(["ethernets.enp1s0"]);
    const rewrite = rewriteMacMatches(original);
    expect(rewrite.changes).toEqual(["ethernets.enp1s0: matched by the name enp1s0, not by MAC 52:54:00:6b:3c:58"]);
    expect(rewrite.text).toBe(
      original.replace(
        "            match:\n                macaddress: 52:54:00:6b:3c:58\n            set-name: enp1s0\n",
        "",
      ),
    );
    expect(parseYaml(rewrite.text)).toEqual({ network: { version: 2, ethernets: { enp1s0: { dhcp4: true } } } });
    expect(macMatchedInterfaces(rewrite.text)).toEqual([]);
    expect(rewriteMacMatches(rewrite.text).changed).toBe(false);
  });

  it("a static interface keeps its addresses and gets no DHCP", () => {
    const rewrite = rewriteMacMatches(fixture("netplan/50-cloud-init-two-nics.yaml"));
    expect(parseYaml(rewrite.text).network.ethernets).toEqual({
      enp1s0: { dhcp4: true },
      enp2s0: { addresses: ["10.0.0.5/24"], gateway4: "10.0.0.1" },
    });
  });

  it("a free id in a bridge is matched by a name pattern and given no addressing; set-name becomes the match", () => {
    const rewrite = rewriteMacMatches(fixture("netplan/01-builder.yaml"));
    expect(rewrite.changes).toEqual([
      "ethernets.id0: matched by names matching e* (the file does not say which interface it is), not by MAC 52:54:00:ab:cd:ef",
      "ethernets.lan: matched by the name enp2s0, not by MAC 52:54:00:ab:cd:f0; DHCP on",
    ]);
    expect(rewrite.problems).toEqual([]);
    expect(parseYaml(rewrite.text).network.ethernets).toEqual({
      id0: { match: { name: "e*" } },
      lan: { match: { name: "enp2s0" }, mtu: 1450, dhcp4: true },
    });
  });

  it("keeps other match criteria, and refuses what it cannot tell apart", () => {
    const text = [
      "network:",
      "  version: 2",
      "  ethernets:",
      "    fast:",
      "      match: {macaddress: '52:54:00:00:00:01', driver: mlx5_core}",
      "      dhcp4: true",
      "    storage:",
      "      match: {macaddress: '52:54:00:00:00:02'}",
      "      set-name: storage0",
      "    a:",
      "      match: {macaddress: '52:54:00:00:00:03'}",
      "    b:",
      "      match: {macaddress: '52:54:00:00:00:04'}",
      "      macaddress: '52:54:00:99:99:99'",
      "",
    ].join("\n");
    const rewrite = rewriteMacMatches(text);
    expect(parseYaml(rewrite.text).network.ethernets.fast).toEqual({ match: { driver: "mlx5_core" }, dhcp4: true });
    expect(rewrite.problems).toEqual([
      "ethernets.storage is renamed to storage0 by its MAC 52:54:00:00:00:02; on a clone nothing tells which interface that is: match it by its kernel name by hand",
      "ethernets.a is one of 2 interfaces told apart only by MAC; match each by its kernel name by hand",
      "ethernets.b is one of 2 interfaces told apart only by MAC; match each by its kernel name by hand",
    ]);
    expect(rewrite.warnings).toEqual([
      "ethernets.b sets macaddress 52:54:00:99:99:99: every clone would use that MAC; remove it by hand if it is not wanted",
    ]);
    expect(macMatchedInterfaces(rewrite.text)).toEqual(["ethernets.storage", "ethernets.a", "ethernets.b"]);
  });

  it("YAML netplan could not read either is an error, not a rewrite", () => {
    expect(() => rewriteMacMatches("network:\n  ethernets: [\n")).toThrow();
    expect(() => macMatchedInterfaces("network: {\n")).toThrow();
  });
});

describe("first-boot host key unit", () => {
  it("recognises units that run ssh-keygen -A, ours included, and not Debian's ssh.service", () => {
    expect(unitRegeneratesHostKeys(REGENERATE_UNIT_TEXT)).toBe(true);
    expect(unitRegeneratesHostKeys("[Service]\nExecStartPre=/usr/bin/ssh-keygen -q -A\n")).toBe(true);
    expect(unitRegeneratesHostKeys("[Service]\nExecStart=/usr/libexec/openssh/sshd-keygen %i\n")).toBe(true);
    expect(unitRegeneratesHostKeys(readFileSync("/lib/systemd/system/ssh.service", "utf8"))).toBe(false);
    expect(unitRegeneratesHostKeys("# ExecStart=/usr/bin/ssh-keygen -A\n")).toBe(false);
  });
});

describe("paths inside the image", () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), "ws-seal-rootfs-"));
    await mkdir(path.join(root, "var/lib/cloud/instances/iid-1"), { recursive: true });
    await symlink("/var/lib/cloud/instances/iid-1", path.join(root, "var/lib/cloud/instance"));
    await symlink("../run", path.join(root, "var/run"));
    await symlink("/etc/passwd", path.join(root, "var/lib/escape"));
    await symlink("loop", path.join(root, "loop"));
    await writeFile(path.join(root, "var/lib/cloud/instances/iid-1/datasource"), "x");
  });
  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("follows absolute symlinks inside the root, never out of it", async () => {
    expect(await resolveInRoot(root, "/var/lib/cloud/instance/datasource")).toBe(
      path.join(root, "var/lib/cloud/instances/iid-1/datasource"),
    );
    expect(await resolveInRoot(root, "/var/lib/escape", true)).toBe(path.join(root, "etc/passwd"));
    expect(await resolveInRoot(root, "/var/run/utmp")).toBe(path.join(root, "run/utmp"));
    expect(await resolveInRoot(root, "/../../../etc/shadow")).toBe(path.join(root, "etc/shadow"));
  });

  it("does not follow the last component unless asked", async () => {
    expect(await resolveInRoot(root, "/var/lib/cloud/instance")).toBe(path.join(root, "var/lib/cloud/instance"));
    expect(await resolveInRoot(root, "/var/lib/cloud/instance", true)).toBe(
      path.join(root, "var/lib/cloud/instances/iid-1"),
    );
  });

  it("a symlink loop is an error", async () => {
    await expect(resolveInRoot(root, "/loop/x")).rejects.toThrow(/too many levels of symbolic links/);
  });
});

/** Facts of a live system after its first boot, for planner choices the tree tests cannot reach. */
function liveFacts(overrides: Partial<SealFacts["cloudInit"]> = {}): SealFacts {
  const entry = (p: string, kind: "file" | "directory" | "symlink" = "file") => ({ path: p, kind, size: 1 });
  return {
    root: "/",
    live: true,
    cloudInit: {
      installed: true,
      cleanHelp: fixture("cloud-init-24.1-clean-help.txt"),
      cleanHelpError: null,
      settings: { networkConfigDisabled: false, regeneratesHostKeys: true, problems: [] },
      disabled: false,
      state: [entry("/var/lib/cloud/instance", "symlink"), entry("/var/lib/cloud/instances", "directory")],
      logs: [entry("/var/log/cloud-init.log")],
      generatedNetwork: [entry("/etc/netplan/50-cloud-init.yaml")],
      generatedSsh: [],
      cleanHooks: [],
      ...overrides,
    },
    machineId: { entry: entry("/etc/machine-id"), content: "3d1219c7c4c5404aaa1f6d2a48adfda4\n" },
    dbusMachineId: { entry: entry("/var/lib/dbus/machine-id", "symlink"), linkTarget: "/etc/machine-id" },
    netplan: [
      {
        path: "/etc/netplan/50-cloud-init.yaml",
        text: fixture("netplan/50-cloud-init.yaml"),
        mode: 0o600,
        error: null,
      },
    ],
    sshHostKeys: [entry("/etc/ssh/ssh_host_ed25519_key")],
    keyRegeneration: {
      units: [{ path: "/usr/lib/systemd/system/sshd-keygen@.service", enabled: true }],
      ourUnitText: null,
      ourUnitLinked: false,
    },
    agentState: [],
    agentConfig: null,
    logs: { truncate: [], remove: [] },
    journal: [],
    histories: [],
    tmp: [],
    randomSeeds: [],
    dhcpLeases: [],
  };
}

describe("planSeal on the running system", () => {
  const byId = (facts: SealFacts) => Object.fromEntries(planSeal(facts).map((op) => [op.id, op]));

  it("runs the real cloud-init clean first, with what its --help offers, then the rest by hand", () => {
    const plan = byId(liveFacts());
    expect(planSeal(liveFacts())[0]!.id).toBe("cloud-init-clean");
    expect(plan["cloud-init-clean"]!.actions).toEqual([
      { kind: "run", argv: ["/usr/bin/cloud-init", "clean", "--logs", "--machine-id", "--configs", "all"] },
    ]);
    expect(plan["cloud-init-generated-config"]!.actions).toEqual([
      { kind: "remove", path: "/etc/netplan/50-cloud-init.yaml" },
    ]);
    // Removed as cloud-init's, so not rewritten too.
    expect(plan["netplan-mac-match"]!.actions).toEqual([]);
    // A symlinked dbus machine-id is kept; another unit already makes host keys.
    expect(plan["machine-id"]!.actions).toEqual([
      expect.objectContaining({ kind: "write", path: "/etc/machine-id", content: "uninitialized\n", mode: 0o444 }),
    ]);
    expect(plan["machine-id"]!.notes).toEqual(["kept /var/lib/dbus/machine-id: a symlink to /etc/machine-id"]);
    expect(plan["ssh-host-key-regeneration"]!.actions).toEqual([]);
    expect(plan["ssh-host-key-regeneration"]!.notes).toContain(
      "already ensured by /usr/lib/systemd/system/sshd-keygen@.service",
    );
  });

  it("on cloud-init 22.4 it says what the old clean cannot do, and the by-hand steps cover it", () => {
    const plan = byId(liveFacts({ cleanHelp: fixture("cloud-init-22.4-clean-help.txt") }));
    expect(plan["cloud-init-clean"]!.actions).toEqual([
      { kind: "run", argv: ["/usr/bin/cloud-init", "clean", "--logs", "--machine-id"] },
    ]);
    expect(plan["cloud-init-clean"]!.notes).toEqual([
      "this cloud-init has no --configs: the same is done by hand below",
    ]);
    expect(plan["cloud-init-generated-config"]!.actions).toHaveLength(1);
  });

  it("holds the network config back when cloud-init is disabled, and rewrites it instead", () => {
    const plan = byId(liveFacts({ disabled: true }));
    expect(plan["cloud-init-clean"]!.actions[0]).toEqual({
      kind: "run",
      argv: ["/usr/bin/cloud-init", "clean", "--logs", "--machine-id", "--configs", "ssh_config"],
    });
    expect(plan["cloud-init-generated-config"]!.actions).toEqual([]);
    expect(plan["netplan-mac-match"]!.actions).toEqual([
      expect.objectContaining({ kind: "write", path: "/etc/netplan/50-cloud-init.yaml" }),
    ]);
  });

  it("a --help that cannot be read is a failed step; a machine without cloud-init skips it", () => {
    expect(
      byId(liveFacts({ cleanHelp: null, cleanHelpError: "cloud-init clean --help: exit status 1" }))[
        "cloud-init-clean"
      ]!.problems,
    ).toEqual(["cloud-init clean --help: exit status 1"]);
    expect(byId(liveFacts({ installed: false, cleanHelp: null }))["cloud-init-clean"]!.skipped).toBe(
      "cloud-init is not installed in this image",
    );
  });

  it("verification names what is left", () => {
    const checks = verifySeal(liveFacts());
    expect(checks.filter((c) => !c.ok).map((c) => `${c.id}: ${c.detail}`)).toEqual([
      'machine-id: /etc/machine-id reads "3d1219c7c4c5404aaa1f6d2a48adfda4"',
      "ssh-host-keys: left: /etc/ssh/ssh_host_ed25519_key",
      "netplan-mac-match: left: /etc/netplan/50-cloud-init.yaml: ethernets.enp1s0",
      "cloud-init-state: left: /var/lib/cloud/instance, /var/lib/cloud/instances",
    ]);
  });
});
