// Standalone starts: no KubeVirt, so ws knows what it stopped (the last-stop record, kept in
// memory like the rest of standalone state) and starts a VM the way it stops one: with the
// configured argv command (standalone.startCommand, e.g. ["virsh", "start", "{name}"]). Without
// that command the starting page says so and how to start the VM instead, and never shows a
// button that cannot work. The stages a Kubernetes VM goes through (scheduled, running) are the
// command's own: it ran, it returned; then the agent of the new boot, then ready.
import { type VmKey, vmId } from "../../model/vm-key.js";
import type { StopEvidence } from "../../loop/actions.js";
import { lastStopFactsOf, lastStopSignals, withDispute, type LastStopFacts } from "../../loop/last-stop.js";
import type { DisputeOutcome, StartFacts, StartPlatform, StartResult } from "../../comeback/start/platform.js";
import { expandStopCommand, runStopCommand } from "./stop-command.js";
import { DEFAULT_ANNOTATION_PREFIX } from "../../engine/policy.js";
import {
  appendReturn,
  encodeReturns,
  parseReturns,
  RETURNS_ANNOTATION,
  type ReturnRecord,
} from "../../comeback/warm/returns.js";

/** Bounded: the stops and starts of this many VMs are remembered. */
const MAX_VMS = 10_000;

export interface StandaloneStartOptions {
  startCommand?: readonly string[];
  /** The VMs the config file names (they can be started before their agent ever connected). */
  configured: () => VmKey[];
  labels: (vm: VmKey) => Record<string, string>;
  annotations: (vm: VmKey) => Record<string, string>;
  /** The annotation prefix (what writeAnnotations puts before a name; default ws's own). */
  prefix?: string;
  owner: (vm: VmKey) => string;
  /** When the VM's agent stream opened, if one is open. */
  connectedAtMs: (vm: VmKey) => number | undefined;
  nowMs: () => number;
  /** Runs the command, its placeholders replaced (tests inject one); default: execFile, never a shell. */
  run?: (argv: readonly string[], vm: VmKey) => Promise<{ ok: boolean; message: string }>;
}

interface StartRun {
  requestedAtMs: number;
  doneAtMs?: number;
  ok?: boolean;
}

/** What the starting page says when standalone has no start command (pure). */
export function noStartCommandHint(vm: VmKey): string {
  return `This collector runs standalone without standalone.startCommand, so it cannot start ${vmId(vm)} itself. Start it the way this machine's VMs are started (for example virsh start ${vm.name}, or your hypervisor's console); ws only stopped it. Your files are on its disk, as it was.`;
}

export class StandaloneStarts implements StartPlatform {
  private readonly stops = new Map<string, LastStopFacts>();
  private readonly starts = new Map<string, StartRun>();
  /** Settings written at run time (the start schedule), over the configured annotations; in memory. */
  private readonly written = new Map<string, Record<string, string>>();

  constructor(private readonly options: StandaloneStartOptions) {}

  /** ws stopped the VM: the record the starting page and the welcome back read. */
  recordStop(vm: VmKey, reason: string, evidence: StopEvidence | undefined, atMs: number): void {
    // `when` to the millisecond: the record stays in memory, and the page's stop time is its key.
    const raw = {
      when: new Date(atMs).toISOString(),
      reason,
      signals: lastStopSignals(evidence),
      ...(evidence?.bootId ? { bootId: evidence.bootId } : {}),
    };
    const facts = lastStopFactsOf(raw);
    if (facts) this.remember(this.stops, vmId(vm), facts);
    this.starts.delete(vmId(vm));
  }

  list(): VmKey[] {
    const ids = new Set([...this.options.configured().map(vmId), ...this.stops.keys(), ...this.starts.keys()]);
    return [...ids].map((id) => {
      const [namespace = "", name = ""] = id.split("/");
      return { namespace, name };
    });
  }

  facts(vm: VmKey): StartFacts | undefined {
    const id = vmId(vm);
    const stop = this.stops.get(id);
    const run = this.starts.get(id);
    const connectedAt = this.options.connectedAtMs(vm);
    const known = stop !== undefined || run !== undefined || connectedAt !== undefined;
    if (!known && !this.options.configured().some((key) => vmId(key) === id)) return undefined;
    // Running: the start command returned ok, or an agent connected after the stop (started some other way).
    const runningSince =
      run?.ok && run.doneAtMs !== undefined
        ? run.doneAtMs
        : connectedAt !== undefined && (stop === undefined || connectedAt > stop.atMs)
          ? connectedAt
          : undefined;
    const commandRan = run?.doneAtMs !== undefined && run.ok ? run.doneAtMs : undefined;
    const hint = this.options.startCommand ? undefined : noStartCommandHint(vm);
    return {
      owner: this.options.owner(vm) || null,
      runStrategy: "",
      status: runningSince !== undefined ? "Running" : stop ? "Stopped" : "",
      allocates: [],
      wantsToRun: runningSince !== undefined || (run !== undefined && run.ok !== false),
      instance:
        runningSince !== undefined
          ? {
              phase: "Running",
              nodeName: null,
              createdAtMs: runningSince,
              phaseTimes: { Scheduled: commandRan ?? runningSince, Running: runningSince },
              unschedulable: null,
            }
          : null,
      lastStop: stop ?? null,
      labels: this.options.labels(vm),
      annotations: { ...this.options.annotations(vm), ...(this.written.get(id) ?? {}) },
      ...(hint ? { startHint: hint } : {}),
      stageLabels: { scheduled: "Start command run", running: "Start command done" },
    };
  }

  async start(vm: VmKey): Promise<StartResult> {
    const template = this.options.startCommand;
    if (!template) return { ok: false, message: noStartCommandHint(vm) };
    const facts = this.facts(vm);
    if (facts?.instance) return { ok: true, already: true, message: "already running (its agent is connected)" };
    const run: StartRun = { requestedAtMs: this.options.nowMs() };
    this.remember(this.starts, vmId(vm), run);
    const argv = expandStopCommand(template, vm);
    const result = await (this.options.run ?? ((command, key) => runStopCommand(command, key)))(argv, vm);
    run.doneAtMs = this.options.nowMs();
    run.ok = result.ok;
    return result.ok
      ? { ok: true, already: false, message: `start command ran (${result.message})` }
      : { ok: false, message: result.message };
  }

  async recordDispute(vm: VmKey, dispute: Record<string, unknown>, stopAtMs: number): Promise<DisputeOutcome> {
    const stop = this.stops.get(vmId(vm));
    if (!stop) return { kept: "failed", message: "no last-stop record to keep it with" };
    if (stop.disputedAtMs !== undefined) return { kept: "already", atMs: stop.disputedAtMs };
    if (stop.atMs !== stopAtMs)
      return { kept: "failed", message: "the VM was stopped again since this page was shown" };
    const disputed = lastStopFactsOf(withDispute(stop.raw ?? {}, dispute));
    if (disputed) this.stops.set(vmId(vm), disputed);
    return { kept: "kept", message: "kept with the stop (in memory: standalone keeps no state across restarts)" };
  }

  async writeAnnotations(
    vm: VmKey,
    annotations: Record<string, string | null>,
  ): Promise<{ ok: boolean; message: string }> {
    const id = vmId(vm);
    const current = { ...(this.written.get(id) ?? {}) };
    for (const [name, value] of Object.entries(annotations)) {
      const key = `${this.options.prefix ?? DEFAULT_ANNOTATION_PREFIX}${name}`;
      if (value === null) {
        // A configured value is hidden by an empty one: "cleared" means cleared until a restart.
        current[key] = "";
      } else current[key] = value;
    }
    this.remember(this.written, id, current);
    return { ok: true, message: "kept in memory (standalone keeps no state across restarts)" };
  }

  /**
   * Keeps a return with the VM's settings, over its configured `returns` (in memory, like the rest of
   * standalone state): a learned warm start reads the returns of this run and those the config names.
   * An arrow, so the start path can call it unbound.
   */
  readonly recordReturn = async (vm: VmKey, record: ReturnRecord, nowMs: number): Promise<string | undefined> => {
    const key = `${this.options.prefix ?? DEFAULT_ANNOTATION_PREFIX}${RETURNS_ANNOTATION}`;
    const current = { ...this.options.annotations(vm), ...(this.written.get(vmId(vm)) ?? {}) }[key];
    const written = await this.writeAnnotations(vm, {
      [RETURNS_ANNOTATION]: encodeReturns(appendReturn(parseReturns(current), record, nowMs)),
    });
    return written.ok ? undefined : written.message;
  };

  private remember<T>(map: Map<string, T>, id: string, value: T): void {
    map.delete(id);
    map.set(id, value);
    while (map.size > MAX_VMS) map.delete(map.keys().next().value!);
  }
}
