import { describe, expect, it } from "vitest";
import { ConfigError, resolveAgentConfig, type ConfigSources } from "../src/config.js";

const base = (over: Partial<ConfigSources> = {}): ConfigSources => ({
  filePath: "/etc/ws-agent/config.yaml",
  env: {},
  flags: {},
  requireCollector: true,
  ...over,
});

const goodFile = `
collector:
  address: collector.ws-system.svc:7443
  caFile: /etc/ws-agent/ca.pem
vm:
  namespace: team-a
  name: alice-ws
tokenFile: /etc/ws-agent/token
reportInterval: 30s
jupyter:
  urls: ["http://127.0.0.1:8888/?token=abc"]
  timeout: 2s
disk:
  mounts: ["/", "/home"]
`;

function problemsOf(sources: ConfigSources): string[] {
  try {
    resolveAgentConfig(sources);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error("expected a ConfigError");
}

describe("the per-VM credential disk", () => {
  const credential = {
    configText:
      'collector:\n  addresses: ["ws-collector.ws-system.svc.cluster.local:7443", "10.96.40.7:7443"]\n  serverName: "ws-collector.ws-system.svc"\nvm:\n  namespace: "team-a"\n  name: "alice-workstation"\n',
    token: "wst1.from-the-disk\n",
    caFile: "/run/ws/credential/collector-ca.crt",
  };
  it("supplies everything a config file without identity lacks", () => {
    const dirs: string[] = [];
    const config = resolveAgentConfig(
      base({
        fileText: "reportInterval: 30s\n",
        readCredential: (dir) => {
          dirs.push(dir);
          return credential;
        },
      }),
    );
    expect(dirs).toEqual(["/run/ws/credential"]);
    expect(config.collector).toEqual({
      address: "ws-collector.ws-system.svc.cluster.local:7443",
      addresses: ["ws-collector.ws-system.svc.cluster.local:7443", "10.96.40.7:7443"],
      caFile: "/run/ws/credential/collector-ca.crt",
      serverName: "ws-collector.ws-system.svc",
      insecure: false,
    });
    expect(config.vm).toEqual({ namespace: "team-a", name: "alice-workstation" });
    expect(config.token).toBe("wst1.from-the-disk");
  });

  it("the config file's own settings win; credentialDir moves the disk", () => {
    const config = resolveAgentConfig(
      base({
        fileText: `${goodFile}credentialDir: /mnt/cred\n`,
        readTokenFile: () => "wst1.file",
        readCredential: (dir) => (dir === "/mnt/cred" ? credential : undefined),
      }),
    );
    expect(config.collector.addresses).toEqual(["collector.ws-system.svc:7443"]);
    expect(config.vm).toEqual({ namespace: "team-a", name: "alice-ws" });
    expect(config.token).toBe("wst1.file");
  });
});

describe("collector addresses, tried in order", () => {
  const identity = "vm: { namespace: team-a, name: alice-ws }\ntoken: t\n";
  it("takes a list in collector.address or collector.addresses, first the cluster name", () => {
    const config = resolveAgentConfig(
      base({
        fileText: `collector:\n  address: ws-collector.ws-system.svc.cluster.local:7443\n  addresses: [10.0.0.40:30743, ws.corp.example.org:7443]\n${identity}`,
      }),
    );
    expect(config.collector.addresses).toEqual([
      "ws-collector.ws-system.svc.cluster.local:7443",
      "10.0.0.40:30743",
      "ws.corp.example.org:7443",
    ]);
    expect(config.collector.address).toBe("ws-collector.ws-system.svc.cluster.local:7443");
    const listed = resolveAgentConfig(base({ fileText: `collector:\n  address: [a:1, "[fd00::1]:2"]\n${identity}` }));
    expect(listed.collector.addresses).toEqual(["a:1", "[fd00::1]:2"]);
  });

  it("a flag or WS_AGENT_COLLECTOR, comma-separated, replaces the file's", () => {
    const file = `collector: { address: file:1 }\n${identity}`;
    expect(
      resolveAgentConfig(base({ fileText: file, env: { WS_AGENT_COLLECTOR: "e:1, e:2" } })).collector.addresses,
    ).toEqual(["e:1", "e:2"]);
    expect(resolveAgentConfig(base({ fileText: file, flags: { collector: "f:1" } })).collector.addresses).toEqual([
      "f:1",
    ]);
  });

  it("names each bad entry", () => {
    expect(problemsOf(base({ fileText: `collector: { addresses: [ok:1, noport, 7] }\n${identity}` }))).toEqual([
      "/etc/ws-agent/config.yaml: collector.addresses: expected host:port or a list of them",
      'collector address "noport" must be host:port (for example collector.ws-system.svc:7443)',
    ]);
  });
});

describe("resolveAgentConfig", () => {
  it("reads what cloud-init writes", () => {
    const config = resolveAgentConfig(base({ fileText: goodFile, readTokenFile: () => "wst1.secret\n" }));
    expect(config.collector).toEqual({
      address: "collector.ws-system.svc:7443",
      addresses: ["collector.ws-system.svc:7443"],
      caFile: "/etc/ws-agent/ca.pem",
      insecure: false,
    });
    expect(config.vm).toEqual({ namespace: "team-a", name: "alice-ws" });
    expect(config.token).toBe("wst1.secret");
    expect(config.reportIntervalSeconds).toBe(30);
    expect(config.jupyter).toEqual({ urls: ["http://127.0.0.1:8888/?token=abc"], timeoutMs: 2000 });
    expect(config.disk.mounts).toEqual(["/", "/home"]);
    expect(config.roots.proc).toBe("/proc");
    expect(config.socketPath).toBe("/run/ws-agent/agent.sock");
  });

  it("lets env override the file and flags override env", () => {
    const config = resolveAgentConfig(
      base({
        fileText: goodFile,
        readTokenFile: () => "from-file",
        env: { WS_AGENT_COLLECTOR: "env-host:1", WS_AGENT_TOKEN: "from-env", WS_AGENT_VM_NAME: "env-vm" },
        flags: { collector: "flag-host:2", procRoot: "/tmp/proc" },
      }),
    );
    expect(config.collector.address).toBe("flag-host:2");
    expect(config.token).toBe("from-env");
    expect(config.vm.name).toBe("env-vm");
    expect(config.roots.proc).toBe("/tmp/proc");
  });

  it("explains bad YAML", () => {
    expect(() => resolveAgentConfig(base({ fileText: "collector: [unclosed" }))).toThrow(/not valid YAML/);
  });

  it("lists every missing field needed to connect", () => {
    const problems = problemsOf(base({ fileText: "" }));
    expect(problems.join("\n")).toMatch(/no collector address/);
    expect(problems.join("\n")).toMatch(/no VM identity/);
    expect(problems.join("\n")).toMatch(/no token/);
  });

  it("needs no identity for probe", () => {
    expect(resolveAgentConfig(base({ requireCollector: false })).collector.address).toBe("");
  });

  it("rejects bad durations, unknown keys, bad names and bad addresses with their place", () => {
    const problems = problemsOf(
      base({
        fileText: `collector: { address: "no-port" }\nvm: { namespace: Team_A, name: ok }\ntoken: t\nreportInterval: 15 parsecs\nreportIntervall: 5s\ndisabledSignals: [gpu, telepathy]\ngpu: { timeout: 0s }\n`,
      }),
    );
    const text = problems.join("\n");
    expect(text).toMatch(/collector address "no-port" must be host:port/);
    expect(text).toMatch(/VM namespace "Team_A" is not a valid Kubernetes name/);
    expect(text).toMatch(/report interval: "15 parsecs" is not a duration/);
    expect(text).toMatch(/unknown setting "reportIntervall"/);
    expect(text).toMatch(/unknown signal "telepathy"/);
    expect(text).toMatch(/gpu.timeout: "0s" is zero/);
  });

  it("refuses an absurd report interval", () => {
    expect(
      problemsOf(base({ fileText: goodFile, readTokenFile: () => "t", flags: { reportInterval: "2d" } })).join(),
    ).toMatch(/over an hour/);
  });

  it("reports an unreadable token file", () => {
    const problems = problemsOf(
      base({
        fileText: goodFile,
        readTokenFile: () => {
          throw new Error("ENOENT: no such file");
        },
      }),
    );
    expect(problems.join("\n")).toMatch(/tokenFile \/etc\/ws-agent\/token: ENOENT/);
  });

  it("accepts YAML booleans for collector.insecure", () => {
    expect(
      resolveAgentConfig(base({ requireCollector: false, fileText: "collector: { insecure: true }" })).collector
        .insecure,
    ).toBe(true);
    expect(
      resolveAgentConfig(base({ requireCollector: false, fileText: "collector: { insecure: false }" })).collector
        .insecure,
    ).toBe(false);
  });

  it("parses WS_AGENT_INSECURE strictly", () => {
    expect(problemsOf(base({ env: { WS_AGENT_INSECURE: "maybe" } })).join()).toMatch(/expected true or false/);
    expect(
      resolveAgentConfig(base({ requireCollector: false, env: { WS_AGENT_INSECURE: "yes" } })).collector.insecure,
    ).toBe(true);
  });
});
