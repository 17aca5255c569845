/**
 * The shipped collector (packages/collector/dist/ws-collector.cjs), standalone, on the host's
 * loopback, as the guests see it: 10.0.2.2 under QEMU's user networking. It records every
 * Report into a trace file, so tests can read what the collector received (sessions, leases,
 * inhibitors), beside its status API and metrics.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { stringify } from "yaml";
import { loadKey } from "../../packages/collector/src/links/key-file.js";
import { deriveStartLinkKey, startLinkUrl } from "../../packages/collector/src/links/start-token.js";
import type { Stage, StartStatus } from "../../packages/collector/src/comeback/start/progress.js";
import { collectorBundle, freePort, getText, repoRoot, start, type Proc } from "../support/process.js";

/** The guest-side address of the host's loopback under `-netdev user`. */
export const HOST_FROM_GUEST = "10.0.2.2";

export const STOP_SCRIPT = path.join(repoRoot, "test/vm/qmp-powerdown.mjs");
export const START_SCRIPT = path.join(repoRoot, "test/vm/start-request.mjs");

export interface VmTestPolicy {
  "idle-timeout": string;
  "grace-period": string;
  [knob: string]: string;
}

export interface CollectorConfigSpec {
  grpcPort: number;
  httpPort: number;
  keyFile: string;
  traceFile: string;
  reportInterval: string;
  /** reportHeartbeat (docs/protocol.md); absent: the shipped default, reports on change. */
  reportHeartbeat?: string;
  /** argv; {namespace} and {name} are replaced by the collector. */
  stopCommand: string[];
  /** argv of the start command (the start link's POST runs it). */
  startCommand?: string[];
  /** VMs named in the config (standalone.vms, "ns/name" → annotations): known to the collector while off, e.g. for a start schedule. */
  configuredVms?: Record<string, Record<string, string>>;
  policy: VmTestPolicy;
}

export function collectorConfigYaml(spec: CollectorConfigSpec): string {
  return stringify({
    mode: "standalone",
    grpc: { listen: `127.0.0.1:${spec.grpcPort}` },
    http: { listen: `127.0.0.1:${spec.httpPort}` },
    notifications: { publicUrl: `http://127.0.0.1:${spec.httpPort}` },
    tokenKeyFile: spec.keyFile,
    reportInterval: spec.reportInterval,
    ...(spec.reportHeartbeat ? { reportHeartbeat: spec.reportHeartbeat } : {}),
    tick: "1s",
    recordTrace: spec.traceFile,
    standalone: {
      stopCommand: spec.stopCommand,
      ...(spec.startCommand ? { startCommand: spec.startCommand } : {}),
      ...(spec.configuredVms
        ? {
            vms: Object.fromEntries(
              Object.entries(spec.configuredVms).map(([id, annotations]) => [id, { annotations }]),
            ),
          }
        : {}),
    },
    policy: { defaults: { autostop: "enabled", mode: "enforce", ...spec.policy } },
  });
}

/** What /api/vms serves: the collector's own view type, so the test cannot drift from it. */
export type { VmView } from "../../packages/collector/src/model/vm-view.js";
import type { VmView } from "../../packages/collector/src/model/vm-view.js";

/** The start link's JSON: the starting page's status and stages (requested → … → ready). */
export interface StartStagesView {
  status: StartStatus;
  stages: Stage[];
}

/** A Report as the trace records it (protobuf JSON), with the fields the tests read. */
export interface TracedReport {
  sources?: Array<{ source?: string; state?: string; message?: string }>;
  system?: { uptimeSeconds?: number };
  sessions?: {
    sessions?: Array<{ kind?: string; user?: string; uid?: number; tty?: string; inputAgeSeconds?: number }>;
  };
  inhibitors?: { locks?: Array<{ what?: string; who?: string; why?: string; mode?: string; uid?: number }> };
  leases?: { leases?: Array<{ id?: string; uid?: number; user?: string; reason?: string }> };
  desktop?: {
    locked?: boolean;
    devices?: Array<{ node?: string; name?: string; kind?: string; inputAgeSeconds?: number }>;
  };
}

export interface TraceLine {
  t: number;
  at?: string;
  vm: string;
  report?: TracedReport;
  event?: string;
}

export function parseTrace(text: string): TraceLine[] {
  return text
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.startsWith("#"))
    .map((line) => JSON.parse(line) as TraceLine);
}

export class VmTestCollector {
  private constructor(
    readonly proc: Proc,
    readonly namespace: string,
    readonly grpcPort: number,
    readonly httpPort: number,
    readonly keyFile: string,
    readonly traceFile: string,
  ) {}

  static async start(options: {
    dir: string;
    namespace: string;
    policy: VmTestPolicy;
    reportInterval: string;
    reportHeartbeat?: string;
    stopSocketFor: (nameTemplate: string) => string;
    /** The start command's request file; absent: no start command (the page says how to start instead). */
    startRequestFor?: (nameTemplate: string) => string;
    /** Names (in `namespace`) the config lists under standalone.vms, with their annotations. */
    configuredVms?: Record<string, Record<string, string>>;
  }): Promise<VmTestCollector> {
    if (!existsSync(collectorBundle)) throw new Error(`${collectorBundle} is missing: run 'npm run build'`);
    const keyFile = path.join(options.dir, "token.key");
    const keygen = spawnSync(process.execPath, [collectorBundle, "keygen"], { encoding: "utf8" });
    if (keygen.status !== 0) throw new Error(`ws-collector keygen failed: ${keygen.stderr}`);
    await writeFile(keyFile, keygen.stdout, { mode: 0o600 });
    const grpcPort = await freePort();
    const httpPort = await freePort();
    const traceFile = path.join(options.dir, "collector.trace.jsonl");
    const configFile = path.join(options.dir, "collector.yaml");
    await writeFile(
      configFile,
      collectorConfigYaml({
        grpcPort,
        httpPort,
        keyFile,
        traceFile,
        reportInterval: options.reportInterval,
        ...(options.reportHeartbeat ? { reportHeartbeat: options.reportHeartbeat } : {}),
        stopCommand: [process.execPath, STOP_SCRIPT, options.stopSocketFor("{name}")],
        ...(options.startRequestFor
          ? { startCommand: [process.execPath, START_SCRIPT, options.startRequestFor("{name}")] }
          : {}),
        ...(options.configuredVms
          ? {
              configuredVms: Object.fromEntries(
                Object.entries(options.configuredVms).map(([name, annotations]) => [
                  `${options.namespace}/${name}`,
                  annotations,
                ]),
              ),
            }
          : {}),
        policy: options.policy,
      }),
    );
    const proc = start(collectorBundle, ["serve", "--config", configFile]);
    await proc.waitFor(/collector serving/, 60_000);
    return new VmTestCollector(proc, options.namespace, grpcPort, httpPort, keyFile, traceFile);
  }

  /** host:port the guests dial. */
  get addressFromGuest(): string {
    return `${HOST_FROM_GUEST}:${this.grpcPort}`;
  }

  token(name: string): string {
    const result = spawnSync(
      process.execPath,
      [collectorBundle, "token", "--key-file", this.keyFile, "--namespace", this.namespace, "--name", name],
      { encoding: "utf8" },
    );
    if (result.status !== 0) throw new Error(`ws-collector token failed: ${result.stderr}`);
    return result.stdout.trim();
  }

  async vms(): Promise<VmView[]> {
    const { status, body } = await getText(`http://127.0.0.1:${this.httpPort}/api/vms`);
    if (status !== 200) throw new Error(`/api/vms answered ${status}: ${body.slice(0, 500)}`);
    return (JSON.parse(body) as { vms: VmView[] }).vms;
  }

  async vm(name: string): Promise<VmView | undefined> {
    return (await this.vms()).find((v) => v.namespace === this.namespace && v.name === name);
  }

  /** The start link of a VM ws stopped, as its page shows it. */
  async startLink(name: string): Promise<string | undefined> {
    const { body } = await getText(`http://127.0.0.1:${this.httpPort}/vm/${this.namespace}/${name}`);
    return /<div class="box" id="start-link">[^<]*<a href="([^"]+)"/.exec(body)?.[1]?.replaceAll("&amp;", "&");
  }

  /**
   * A start link for any VM, signed with the collector's key as its pages sign them: its JSON view
   * (the ssh helper's) has the starting page's stages with their times, whatever started the VM.
   */
  mintStartLink(name: string): string {
    const key = deriveStartLinkKey(loadKey(this.keyFile));
    return startLinkUrl(
      `http://127.0.0.1:${this.httpPort}`,
      key,
      { namespace: this.namespace, name },
      Date.now(),
      3600,
    );
  }

  /** The starting page's stages of a VM (JSON, as the ssh helper reads them). */
  async startStages(name: string): Promise<StartStagesView> {
    const res = await fetch(this.mintStartLink(name), { headers: { accept: "application/json" } });
    if (res.status !== 200) throw new Error(`the start link's JSON answered ${res.status}: ${await res.text()}`);
    return (await res.json()) as StartStagesView;
  }

  async metrics(): Promise<string> {
    return (await getText(`http://127.0.0.1:${this.httpPort}/metrics`)).body;
  }

  /** Every trace line of one VM, in order. */
  async trace(name: string): Promise<TraceLine[]> {
    if (!existsSync(this.traceFile)) return [];
    return parseTrace(await readFile(this.traceFile, "utf8")).filter((line) => line.vm === `${this.namespace}/${name}`);
  }

  /** The Reports of one VM received at or after `sinceMs` (collector clock), in order. */
  async reportsSince(name: string, sinceMs: number): Promise<TracedReport[]> {
    return (await this.trace(name))
      .filter((line) => line.report && line.at !== undefined && Date.parse(line.at) >= sinceMs)
      .map((line) => line.report!);
  }

  log(): string {
    return this.proc.output();
  }

  stop(): Promise<number | null> {
    return this.proc.stop();
  }
}
