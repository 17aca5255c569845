/**
 * Starting a VM: PUT /apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachines/{name}/start,
 * the same request `virtctl start` sends. The VM's run strategy stays its own (KubeVirt's rules,
 * docs/coming-back.md): Halted becomes Always, Manual and RerunOnFailure get a Start request and
 * keep their strategy, and the collector never patches spec.runStrategy itself. A VM that is
 * already running (409 "VM is already running") or that KubeVirt keeps running by itself
 * (Always: "does not support manual start requests") is not an error: the page shows its
 * progress. Retried with jittered backoff on 429/5xx/timeouts; one start in flight per VM.
 *
 * Also the starting page's view of the VM (kubeStartPlatform): owner, run strategy, what a start
 * allocates, the VMI's stages and the scheduler's message, the last-stop record.
 */
import type { VmKey } from "../../model/vm-key.js";
import type { DisputeOutcome, StartFacts, StartPlatform, StartResult } from "../../comeback/start/platform.js";
import { lastStopIn, lastStopKey, withDispute } from "../../loop/last-stop.js";
import {
  DEFAULT_BACKOFF,
  parseRetryAfterMs,
  realSleep,
  retrying,
  type Attempt,
  type BackoffPolicy,
  type Sleep,
} from "../../lib/retry.js";
import { describeError, rawKubeRequest, statusMessage, type KubeClients } from "./client.js";
import type { InventoryVm } from "./inventory.js";
import { freedParts, vmOwner } from "./vm-resources.js";
import {
  appendReturn,
  encodeReturns,
  parseReturns,
  RETURNS_ANNOTATION,
  type ReturnRecord,
} from "../../comeback/warm/returns.js";

export function startPath(namespace: string, name: string): string {
  return `/apis/subresources.kubevirt.io/v1/namespaces/${encodeURIComponent(namespace)}/virtualmachines/${encodeURIComponent(name)}/start`;
}

export interface VmStarterOptions {
  maxAttempts?: number;
  requestTimeoutMs?: number;
  backoff?: BackoffPolicy;
  random?: () => number;
  sleep?: Sleep;
}

/** virt-api's 409 for a VM that runs already, or whose strategy runs it by itself: not a failure. */
export function alreadyRunningConflict(message: string): boolean {
  return /already running|does not support manual start requests/i.test(message);
}

export class VmStarter {
  private readonly inFlight = new Map<string, Promise<StartResult>>();

  constructor(
    private readonly clients: KubeClients,
    private readonly options: VmStarterOptions = {},
  ) {}

  /** Never rejects. A second call while the first is in flight shares its answer. */
  startVm(namespace: string, name: string): Promise<StartResult> {
    const key = `${namespace}/${name}`;
    const running = this.inFlight.get(key);
    if (running) return running;
    const work = this.run(namespace, name).finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, work);
    return work;
  }

  private async run(namespace: string, name: string): Promise<StartResult> {
    const outcome = await retrying(
      {
        maxAttempts: this.options.maxAttempts ?? 4,
        backoff: this.options.backoff ?? DEFAULT_BACKOFF,
        random: this.options.random ?? Math.random,
        sleep: this.options.sleep ?? realSleep,
        // A 409 that is not "already running" is KubeVirt refusing this start: asking again changes nothing.
        conflict: "final",
      },
      () => this.attempt(namespace, name),
    );
    if ("done" in outcome) return outcome.done;
    const { message } = outcome.failed;
    return {
      ok: false,
      message: outcome.retryable ? `gave up after ${outcome.attempts} attempts: ${message}` : message,
    };
  }

  private async attempt(namespace: string, name: string): Promise<Attempt<StartResult>> {
    let status: number;
    let message: string;
    let retryAfterMs: number;
    try {
      const answer = await rawKubeRequest(this.clients, {
        method: "PUT",
        path: startPath(namespace, name),
        body: {},
        timeoutMs: this.options.requestTimeoutMs ?? 10_000,
      });
      status = answer.status;
      message = statusMessage(answer.text) ?? `HTTP ${status}`;
      retryAfterMs = parseRetryAfterMs(answer.headers["retry-after"]);
    } catch (err) {
      return { failed: { status: null, message: describeError(err) } };
    }
    if (status >= 200 && status < 300)
      return { done: { ok: true, already: false, message: "start accepted by KubeVirt" } };
    if (status === 409 && alreadyRunningConflict(message))
      return { done: { ok: true, already: true, message: `already running or starting (${message})` } };
    if (status === 404) return { done: { ok: false, message: `VirtualMachine ${namespace}/${name} not found` } };
    if (status === 403)
      return {
        done: { ok: false, message: `the collector may not start VMs (RBAC virtualmachines/start): ${message}` },
      };
    return { failed: { status, message, retryAfterMs } };
  }
}

/** What the starting page shows of a VM, from the inventory (pure). */
export function startFactsOf(vm: InventoryVm, ownerLabel: string, prefix: string): StartFacts {
  const vmi = vm.vmi;
  const live = vmi !== null && vmi.phase !== "Succeeded" && vmi.phase !== "Failed";
  return {
    owner: vmOwner(vm.labels, ownerLabel),
    runStrategy: vm.runStrategy,
    status: vm.printableStatus ?? "",
    allocates: freedParts(vm.resources),
    needs: [...vm.resources.gpus, ...vm.resources.hostDevices].map((device) => device.deviceName),
    wantsToRun: live || vm.runStrategy === "Always" || vm.pendingStateChanges.includes("Start"),
    instance: vmi
      ? {
          phase: vmi.phase,
          nodeName: vmi.nodeName,
          createdAtMs: vmi.createdAtMs,
          phaseTimes: vmi.phaseTimes,
          unschedulable: vmi.unschedulable,
        }
      : null,
    lastStop: lastStopIn(vm.annotations, prefix),
    labels: vm.labels,
    annotations: vm.annotations,
    ...(live && vm.launcherPodIps.length ? { entryAddresses: vm.launcherPodIps } : {}),
  };
}

/** How often a dispute re-reads the VM after a resourceVersion conflict before it gives up. */
const DISPUTE_ATTEMPTS = 8;

const rereadAtOnce: Sleep = async () => {};

/** Retries of a read-then-patch with the read's resourceVersion: a 409 means read again, at once. */
const rereadOn409 = (attempts = DISPUTE_ATTEMPTS) => ({
  maxAttempts: attempts,
  backoff: DEFAULT_BACKOFF,
  random: Math.random,
  // No wait: a 409 is answered by reading the VM again, not by time.
  sleep: rereadAtOnce,
  // 409: someone wrote the VM since the read (another dispute, a return, a new stop): read again.
  conflict: "retry" as const,
});

/**
 * Keeps a dispute in the VM's last-stop annotation, once per stop (a plain read-then-patch let
 * 200 parallel POSTs write 116 patches). The VM is read from the API server, not the inventory (a watch may not have
 * delivered the last write yet), and the merge patch carries that read's resourceVersion, so the
 * API server refuses it (409) when anything changed the VM since: the dispute is then read again,
 * and a record that has one by now answers "already".
 */
export function kubeDisputeWriter(
  clients: KubeClients,
  prefix: string,
  options: { attempts?: number; timeoutMs?: number } = {},
): (vm: VmKey, dispute: Record<string, unknown>, stopAtMs: number) => Promise<DisputeOutcome> {
  const key = lastStopKey(prefix);
  return async (vm, dispute, stopAtMs) => {
    const path = `/apis/kubevirt.io/v1/namespaces/${encodeURIComponent(vm.namespace)}/virtualmachines/${encodeURIComponent(vm.name)}`;
    const outcome = await retrying<DisputeOutcome>(rereadOn409(options.attempts), async () => {
      try {
        const read = await rawKubeRequest(clients, { method: "GET", path, timeoutMs: options.timeoutMs ?? 10_000 });
        if (read.status !== 200)
          return {
            done: { kept: "failed", message: `reading the VM: ${statusMessage(read.text) ?? `HTTP ${read.status}`}` },
          };
        const metadata = (
          JSON.parse(read.text) as { metadata?: { resourceVersion?: string; annotations?: Record<string, string> } }
        ).metadata;
        const stop = lastStopIn(metadata?.annotations, prefix);
        if (!stop?.raw) return { done: { kept: "failed", message: "no last-stop record to keep it with" } };
        if (stop.disputedAtMs !== undefined) return { done: { kept: "already", atMs: stop.disputedAtMs } };
        if (stop.atMs !== stopAtMs)
          return { done: { kept: "failed", message: "the VM was stopped again since this page was shown" } };
        if (!metadata?.resourceVersion) return { done: { kept: "failed", message: "the VM has no resourceVersion" } };
        const patch = await rawKubeRequest(clients, {
          method: "PATCH",
          path,
          contentType: "application/merge-patch+json",
          body: {
            metadata: {
              resourceVersion: metadata.resourceVersion,
              annotations: { [key]: JSON.stringify(withDispute(stop.raw, dispute)) },
            },
          },
          timeoutMs: options.timeoutMs ?? 10_000,
        });
        if (patch.status >= 200 && patch.status < 300)
          return { done: { kept: "kept", message: "kept in the last-stop annotation" } };
        return { failed: { status: patch.status, message: statusMessage(patch.text) ?? `HTTP ${patch.status}` } };
      } catch (error) {
        return { failed: { status: null, message: describeError(error) } };
      }
    });
    if ("done" in outcome) return outcome.done;
    const { message } = outcome.failed;
    return { kept: "failed", message: outcome.retryable ? `gave up: ${message}` : message };
  };
}

/**
 * Adds a return to the VM's `returns` annotation (comeback/warm/returns.ts): read, append
 * (bounded), merge-patch with the resourceVersion read, again on a 409. Resolves with what went
 * wrong, or undefined once written.
 */
export function kubeReturnsWriter(
  clients: KubeClients,
  prefix: string,
  options: { attempts?: number; timeoutMs?: number } = {},
): (vm: VmKey, record: ReturnRecord, nowMs: number) => Promise<string | undefined> {
  const key = `${prefix}${RETURNS_ANNOTATION}`;
  return async (vm, record, nowMs) => {
    const path = `/apis/kubevirt.io/v1/namespaces/${encodeURIComponent(vm.namespace)}/virtualmachines/${encodeURIComponent(vm.name)}`;
    const timeoutMs = options.timeoutMs ?? 10_000;
    const outcome = await retrying<string | undefined>(rereadOn409(options.attempts), async () => {
      try {
        const read = await rawKubeRequest(clients, { method: "GET", path, timeoutMs });
        if (read.status !== 200)
          return { done: `reading the VM: ${statusMessage(read.text) ?? `HTTP ${read.status}`}` };
        const metadata = (
          JSON.parse(read.text) as { metadata?: { resourceVersion?: string; annotations?: Record<string, string> } }
        ).metadata;
        if (!metadata?.resourceVersion) return { done: "the VM has no resourceVersion" };
        const records = appendReturn(parseReturns(metadata.annotations?.[key]), record, nowMs);
        const patch = await rawKubeRequest(clients, {
          method: "PATCH",
          path,
          contentType: "application/merge-patch+json",
          body: {
            metadata: { resourceVersion: metadata.resourceVersion, annotations: { [key]: encodeReturns(records) } },
          },
          timeoutMs,
        });
        if (patch.status >= 200 && patch.status < 300) return { done: undefined };
        return { failed: { status: patch.status, message: statusMessage(patch.text) ?? `HTTP ${patch.status}` } };
      } catch (error) {
        return { failed: { status: null, message: describeError(error) } };
      }
    });
    if ("done" in outcome) return outcome.done;
    return outcome.retryable ? `gave up: ${outcome.failed.message}` : outcome.failed.message;
  };
}

export function kubeStartPlatform(
  all: () => InventoryVm[],
  lookup: (vm: VmKey) => InventoryVm | undefined,
  starter: VmStarter,
  ownerLabel: string,
  prefix: string,
  recordDispute?: (vm: VmKey, dispute: Record<string, unknown>, stopAtMs: number) => Promise<DisputeOutcome>,
  patchAnnotations?: (
    vm: VmKey,
    annotations: Record<string, string | null>,
  ) => Promise<{ ok: boolean; message: string }>,
  recordReturn?: (vm: VmKey, record: ReturnRecord, nowMs: number) => Promise<string | undefined>,
): StartPlatform {
  return {
    list: () => all().map((vm) => ({ namespace: vm.namespace, name: vm.name })),
    facts: (vm) => {
      const facts = lookup(vm);
      return facts ? startFactsOf(facts, ownerLabel, prefix) : undefined;
    },
    start: (vm) => starter.startVm(vm.namespace, vm.name),
    ...(recordDispute ? { recordDispute } : {}),
    ...(patchAnnotations
      ? {
          writeAnnotations: (vm: VmKey, annotations: Record<string, string | null>) =>
            patchAnnotations(
              vm,
              Object.fromEntries(Object.entries(annotations).map(([name, value]) => [`${prefix}${name}`, value])),
            ),
        }
      : {}),
    ...(recordReturn ? { recordReturn } : {}),
  };
}
