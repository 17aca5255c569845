// The VM harness's pure parts, on fixtures captured on this machine (test/vm/fixtures/):
// apt sources, sfdisk's JSON, mountinfo with debootstrap's mounts, a QMP transcript.
// The seed's agent config and the collector config are checked by the products' own parsers.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { resolveCollectorConfig } from "../../packages/collector/src/platform/config.js";
import { resolveAgentConfig } from "../../packages/guest-agent/src/config.js";
import { collectorConfigYaml, parseTrace } from "./collector.js";
import { qemuArgs } from "./guest.js";
import { splitQmpMessages } from "./qmp.js";
import {
  debianMirror,
  debootstrapArgs,
  imageRecipe,
  mountsUnder,
  parseAptSources,
  parseSfdiskJson,
  recipeKey,
  rootfsRecipe,
} from "./recipe.js";
import { AGENT_CONFIG_PATH, AGENT_TOKEN_PATH, agentConfigYaml, renderSeed } from "./seed.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures");
const fixture = (name: string) => readFileSync(path.join(fixtures, name), "utf8");

describe("image recipe", () => {
  it("finds the Debian mirror apt uses for bookworm main, not the security suite", () => {
    const sources = parseAptSources(fixture("apt-debian.sources"), "deb822");
    expect(sources.map((s) => s.suites)).toEqual([["bookworm", "bookworm-updates"], ["bookworm-security"]]);
    expect(debianMirror(sources, "bookworm")).toBe("http://deb.debian.org/debian");
  });

  it("reads one-line sources and skips deb-src, comments and disabled stanzas", () => {
    const oneLine = parseAptSources(
      "# deb http://old.example/debian bookworm main\ndeb-src http://src.example/debian bookworm main\n" +
        "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://ftp.fr.debian.org/debian bookworm main contrib\n",
      "one-line",
    );
    expect(debianMirror(oneLine, "bookworm")).toBe("http://ftp.fr.debian.org/debian");
    const disabled = parseAptSources(
      "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n",
      "deb822",
    );
    expect(debianMirror(disabled, "bookworm")).toBeUndefined();
    expect(debianMirror(oneLine, "trixie")).toBeUndefined();
  });

  it("passes the packages to debootstrap as one --include list", () => {
    const args = debootstrapArgs(rootfsRecipe("http://deb.debian.org/debian"), "/cache/rootfs");
    expect(args).toEqual([
      "--variant=minbase",
      expect.stringMatching(/^--include=systemd,.*,nodejs,.*cloud-init,python3-cffi-backend,.*linux-image-cloud-amd64/),
      "bookworm",
      "/cache/rootfs",
      "http://deb.debian.org/debian",
    ]);
  });

  it("keys the cache on every input: the .deb's bytes, the package list, the mirror", () => {
    const base = recipeKey(rootfsRecipe("http://deb.debian.org/debian"));
    expect(recipeKey(rootfsRecipe("http://deb.debian.org/debian"))).toBe(base);
    expect(recipeKey(rootfsRecipe("http://ftp.fr.debian.org/debian"))).not.toBe(base);
    const image = recipeKey(imageRecipe(base, "a".repeat(64)));
    expect(recipeKey(imageRecipe(base, "a".repeat(64)))).toBe(image);
    expect(recipeKey(imageRecipe(base, "b".repeat(64)))).not.toBe(image);
    expect(base).toMatch(/^[0-9a-f]{16}$/);
  });

  it("reads the partition's place from sfdisk --json", () => {
    expect(parseSfdiskJson(fixture("sfdisk-gpt.json"))).toEqual({
      sectorSize: 512,
      partitions: [{ start: 2048, size: 4190208 }],
    });
    expect(() => parseSfdiskJson("{}")).toThrow(/no partition table/);
  });

  it("lists the mounts inside a tree, deepest first, and nothing beside it", () => {
    const mountinfo = fixture("mountinfo-debootstrap.txt");
    expect(mountsUnder(mountinfo, "/tmp/mi/target").sort()).toEqual(["/tmp/mi/target/proc", "/tmp/mi/target/sys"]);
    expect(mountsUnder(mountinfo, "/tmp/mi/targ")).toEqual([]);
    expect(mountsUnder("1 2 0:1 / /a/b\\040c rw - x x rw\n2 1 0:2 / /a/b\\040c/d rw - x x rw\n", "/a/b c")).toEqual([
      "/a/b c/d",
      "/a/b c",
    ]);
  });
});

describe("QMP", () => {
  it("parses a real transcript: greeting, answers by id, an error, an event", () => {
    const { messages, rest } = splitQmpMessages(fixture("qmp-transcript.txt"));
    expect(rest).toBe("");
    expect(messages.map((m) => m.kind)).toEqual(["greeting", "return", "return", "error", "event", "return"]);
    expect(messages[2]).toEqual({
      kind: "return",
      id: 2,
      value: { status: "running", singlestep: false, running: true },
    });
    expect(messages[3]).toMatchObject({
      kind: "error",
      id: 3,
      errorClass: "GenericError",
      description: expect.stringMatching(/Cannot find device='nope'/),
    });
    expect(messages[4]).toMatchObject({
      kind: "event",
      event: { event: "SHUTDOWN", data: { reason: "host-qmp-quit" } },
    });
  });

  it("keeps an incomplete line for later and refuses what is not JSON", () => {
    const { messages, rest } = splitQmpMessages('{"return": {}, "id": 1}\r\n{"retu');
    expect(messages).toHaveLength(1);
    expect(rest).toBe('{"retu');
    expect(() => splitQmpMessages("garbage\n")).toThrow(/not JSON/);
  });
});

describe("QEMU command line", () => {
  it("emulates (TCG), boots the guest's kernel, forwards SSH on loopback, and opens every QMP socket", () => {
    const args = qemuArgs({
      kernel: "/c/vmlinuz",
      initrd: "/c/initrd.img",
      kernelCommandLine: "root=LABEL=ws-root ro",
      disk: "/t/vm1.qcow2",
      seedIso: "/t/seed.iso",
      mac: "52:54:00:00:e2:01",
      sshPort: 2222,
      serialLog: "/t/serial.log",
      qmpSockets: ["/t/a.qmp", "/t/b.qmp"],
    });
    const joined = args.join(" ");
    expect(joined).toContain("-accel tcg -cpu max -machine q35 -smp 2 -m 1024");
    expect(joined).toContain("-kernel /c/vmlinuz -initrd /c/initrd.img -append root=LABEL=ws-root ro");
    expect(joined).toContain("user,id=net0,hostfwd=tcp:127.0.0.1:2222-:22");
    expect(joined).toContain("virtio-net-pci,netdev=net0,mac=52:54:00:00:e2:01");
    expect(args.filter((a) => a === "-qmp")).toHaveLength(2);
    expect(joined).toContain("file=/t/seed.iso,if=none,id=seed,format=raw,readonly=on");
    expect(args).not.toContain("-enable-kvm");
  });
});

describe("cloud-init seed", () => {
  const spec = {
    instanceId: "vm1-0001",
    hostname: "vm1",
    user: { name: "alice", sshPublicKey: "ssh-ed25519 AAAAC3Nza test\n" },
    agent: { collectorAddress: "10.0.2.2:7443", namespace: "e2e", name: "vm1", token: "wst1.secret" },
  };

  it("carries the user, the agent's config and its token, and leaves disk growth to the agent", () => {
    const seed = renderSeed(spec);
    expect(parse(seed.metaData)).toEqual({ "instance-id": "vm1-0001", "local-hostname": "vm1" });
    expect(seed.userData.startsWith("#cloud-config\n")).toBe(true);
    const userData = parse(seed.userData);
    expect(userData.users).toEqual([
      expect.objectContaining({ name: "alice", ssh_authorized_keys: ["ssh-ed25519 AAAAC3Nza test"] }),
    ]);
    expect(userData.growpart).toEqual({ mode: "off" });
    expect(userData.resize_rootfs).toBe(false);
    const files = Object.fromEntries(
      (userData.write_files as Array<{ path: string; content: string; permissions: string }>).map((f) => [f.path, f]),
    );
    expect(files[AGENT_TOKEN_PATH]).toMatchObject({ content: "wst1.secret\n", permissions: "0600" });
    expect(files[AGENT_CONFIG_PATH]?.content).toBe(agentConfigYaml(spec.agent));
  });

  it("writes an agent config the agent itself accepts", () => {
    const config = resolveAgentConfig({
      fileText: agentConfigYaml(spec.agent),
      filePath: AGENT_CONFIG_PATH,
      readTokenFile: (file) => (file === AGENT_TOKEN_PATH ? "wst1.secret\n" : ""),
      env: {},
      flags: {},
      requireCollector: true,
    });
    expect(config.collector).toMatchObject({ address: "10.0.2.2:7443", insecure: true });
    expect(config.vm).toEqual({ namespace: "e2e", name: "vm1" });
    expect(config.token).toBe("wst1.secret");
  });
});

describe("collector config", () => {
  it("is accepted by the collector, with the stop command as argv and the short test policy", () => {
    const text = collectorConfigYaml({
      grpcPort: 7443,
      httpPort: 8080,
      keyFile: "/t/token.key",
      traceFile: "/t/trace.jsonl",
      reportInterval: "3s",
      stopCommand: ["/usr/bin/node", "/r/test/vm/qmp-powerdown.mjs", "/t/{name}.stop.qmp"],
      startCommand: ["/usr/bin/node", "/r/test/vm/start-request.mjs", "/t/{name}.start-request"],
      configuredVms: { "e2e/vm-clone": { "workstation.aik8s.run/idle-timeout": "15m" } },
      policy: { "idle-timeout": "75s", "grace-period": "30s", "cpu-busy-threshold": "off" },
    });
    const config = resolveCollectorConfig(text, "collector.yaml", {}, {});
    expect(config).toMatchObject({ mode: "standalone", reportIntervalSeconds: 3, recordTrace: "/t/trace.jsonl" });
    expect(config.standalone.stopCommand).toEqual([
      "/usr/bin/node",
      "/r/test/vm/qmp-powerdown.mjs",
      "/t/{name}.stop.qmp",
    ]);
    expect(config.standalone.startCommand).toEqual([
      "/usr/bin/node",
      "/r/test/vm/start-request.mjs",
      "/t/{name}.start-request",
    ]);
    // Known while off: a VM that powered itself off keeps its start schedule.
    expect(config.standalone.vms).toEqual({
      "e2e/vm-clone": { labels: {}, annotations: { "workstation.aik8s.run/idle-timeout": "15m" } },
    });
    expect(config.notifications.publicUrl).toBe("http://127.0.0.1:8080");
    expect(parse(config.policyYaml)).toMatchObject({
      defaults: { autostop: "enabled", mode: "enforce", "idle-timeout": "75s" },
    });
  });

  it("reads the recorded trace", () => {
    const lines = parseTrace(
      '{"t":0,"vm":"e2e/vm1","event":"agent-connected"}\n\n# note\n{"t":1.5,"at":"2026-01-01T00:00:01.500Z","vm":"e2e/vm1","report":{"system":{"uptimeSeconds":12}}}\n',
    );
    expect(lines).toHaveLength(2);
    expect(lines[1]?.report?.system?.uptimeSeconds).toBe(12);
  });
});
