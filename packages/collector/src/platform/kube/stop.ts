/**
 * Stopping a VM: PUT /apis/subresources.kubevirt.io/v1/namespaces/{ns}/virtualmachines/{name}/stop.
 *
 * Idempotent: virt-api answers 409 "VM is not running" to a VM that is already stopped (or whose
 * stop it already took, when an earlier answer was lost to a timeout), so a 409 is checked against
 * the VM and its VMI and counts as success when the stop is in effect. Retried with jittered
 * exponential backoff on 409/429/5xx/timeouts, a bounded number of times, each request bounded
 * in time, with few requests in flight across all VMs and one stop at a time per VM.
 *
 * The guest's shutdown time: KubeVirt's StopOptions body is `{ gracePeriod?, dryRun? }`; with a
 * gracePeriod, virt-api first patches the VMI's spec.terminationGracePeriodSeconds to it, without
 * one the VMI keeps its own (the VM template's). The field guides give their GPU workstation 120 s
 * to shut down, so a stop never sends a shorter gracePeriod than the VM's own: by default it sends
 * none, and a requested one below the VM's own is raised to it.
 */
import {
  DEFAULT_BACKOFF,
  Semaphore,
  parseRetryAfterMs,
  realSleep,
  retrying,
  type Attempt,
  type BackoffPolicy,
  type RetryLoop,
  type Sleep,
} from "../../lib/retry.js";
import { describeError, httpStatusOf, rawKubeRequest, statusMessage, type KubeClients } from "./client.js";
import { isStopInEffect, vmFacts, vmiFacts } from "./vm-model.js";

export interface StopVmOptions {
  /** Passed to KubeVirt as `gracePeriod`: seconds the guest gets to shut down. Absent: the VMI's own. */
  gracePeriodSeconds?: number;
  /** The VM's own terminationGracePeriodSeconds: a requested grace period is never shorter. */
  minimumGracePeriodSeconds?: number;
}

/**
 * The `gracePeriod` to send (pure): none unless one is requested, and never less than the VM's
 * own terminationGracePeriodSeconds. Undefined means "send no gracePeriod": the VMI's own applies.
 */
export function stopGracePeriod(options: StopVmOptions): number | undefined {
  const requested = options.gracePeriodSeconds;
  if (requested === undefined) return undefined;
  const own = options.minimumGracePeriodSeconds;
  return own !== undefined && requested < own ? own : requested;
}

export interface StopVmResult {
  /** The stop is in effect (accepted now, or found already stopped). */
  ok: boolean;
  /** The VM was found stopped (or stopping) rather than stopped by this call's PUT. */
  alreadyStopped: boolean;
  /** Stop PUTs sent. */
  attempts: number;
  /** Status of the last answer; null when the last attempt got none (timeout, network). */
  lastStatus: number | null;
  message: string;
}

export interface VmStopperOptions {
  /** Stop PUTs per call, retries included (default 6). */
  maxAttempts?: number;
  /** Limit for each request (default 10 s). */
  requestTimeoutMs?: number;
  /** Stop requests in flight across all VMs (default 4). */
  maxConcurrent?: number;
  backoff?: BackoffPolicy;
  random?: () => number;
  sleep?: Sleep;
}

/** A stop attempt: finished (stopped, found stopped, not found) or a failure for the retry loop. */
type AttemptOutcome = Attempt<Omit<StopVmResult, "attempts">>;

export function stopPath(namespace: string, name: string): string {
  return `/apis/subresources.kubevirt.io/v1/namespaces/${encodeURIComponent(namespace)}/virtualmachines/${encodeURIComponent(name)}/stop`;
}

export class VmStopper {
  private readonly requestTimeoutMs: number;
  /** 409s are checked against the VM first; one that finds it still running is worth another stop. */
  private readonly loop: RetryLoop;
  private readonly semaphore: Semaphore;
  private readonly inFlight = new Map<string, Promise<StopVmResult>>();

  constructor(
    private readonly clients: KubeClients,
    options: VmStopperOptions = {},
  ) {
    const maxAttempts = options.maxAttempts ?? 6;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    this.loop = {
      maxAttempts,
      backoff: options.backoff ?? DEFAULT_BACKOFF,
      random: options.random ?? Math.random,
      sleep: options.sleep ?? realSleep,
      conflict: "retry",
    };
    this.semaphore = new Semaphore(options.maxConcurrent ?? 4);
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1)
      throw new Error(`maxAttempts must be a positive integer, got ${maxAttempts}`);
  }

  /** Never rejects. A second call for a VM whose stop is still running shares the first one's result. */
  stopVm(namespace: string, name: string, options: StopVmOptions = {}): Promise<StopVmResult> {
    const key = `${namespace}/${name}`;
    const running = this.inFlight.get(key);
    if (running) return running;
    const work = this.run(namespace, name, options).finally(() => this.inFlight.delete(key));
    this.inFlight.set(key, work);
    return work;
  }

  private async run(namespace: string, name: string, options: StopVmOptions): Promise<StopVmResult> {
    for (const [key, value] of [
      ["gracePeriodSeconds", options.gracePeriodSeconds],
      ["minimumGracePeriodSeconds", options.minimumGracePeriodSeconds],
    ] as const) {
      if (value !== undefined && (!Number.isInteger(value) || value < 0)) {
        return {
          ok: false,
          alreadyStopped: false,
          attempts: 0,
          lastStatus: null,
          message: `${key} must be a non-negative integer, got ${value}`,
        };
      }
    }
    const grace = stopGracePeriod(options);
    const outcome = await retrying(this.loop, (_attempt, last) =>
      this.semaphore.run(async (): Promise<AttemptOutcome> => {
        // After an attempt with no answer the stop may have landed; with Manual/RerunOnFailure
        // virt-api would accept a second one, so look before sending it again.
        if (last?.status === null && (await this.stopInEffect(namespace, name)).kind === "stopped") {
          return {
            done: {
              ok: true,
              alreadyStopped: true,
              lastStatus: null,
              message: "already stopped (an earlier request went unanswered)",
            },
          };
        }
        return this.attempt(namespace, name, grace);
      }),
    );
    if ("done" in outcome) {
      // A stop found in effect before any PUT of this attempt: that attempt sent nothing.
      const attempts = outcome.done.lastStatus === null ? outcome.attempts - 1 : outcome.attempts;
      return { ...outcome.done, attempts };
    }
    if (!outcome.retryable)
      return {
        ok: false,
        alreadyStopped: false,
        attempts: outcome.attempts,
        lastStatus: outcome.failed.status,
        message: outcome.failed.message,
      };
    return {
      ok: false,
      alreadyStopped: false,
      attempts: outcome.attempts,
      lastStatus: outcome.failed.status,
      message: `gave up after ${outcome.attempts} attempts: ${outcome.failed.message}`,
    };
  }

  private async attempt(namespace: string, name: string, grace: number | undefined): Promise<AttemptOutcome> {
    let status: number;
    let answerMessage: string;
    let retryAfterMs = 0;
    try {
      const answer = await rawKubeRequest(this.clients, {
        method: "PUT",
        path: stopPath(namespace, name),
        body: grace === undefined ? {} : { gracePeriod: grace },
        timeoutMs: this.requestTimeoutMs,
      });
      status = answer.status;
      answerMessage = statusMessage(answer.text) ?? `HTTP ${status}`;
      retryAfterMs = parseRetryAfterMs(answer.headers["retry-after"]);
    } catch (err) {
      return { failed: { status: null, message: describeError(err) } };
    }
    if (status >= 200 && status < 300) {
      return { done: { ok: true, alreadyStopped: false, lastStatus: status, message: "stop accepted" } };
    }
    if (status === 404) {
      return {
        done: {
          ok: false,
          alreadyStopped: false,
          lastStatus: status,
          message: `VirtualMachine ${namespace}/${name} not found`,
        },
      };
    }
    if (status === 409) {
      const check = await this.stopInEffect(namespace, name);
      if (check.kind === "stopped") {
        return {
          done: { ok: true, alreadyStopped: true, lastStatus: status, message: `already stopped (${answerMessage})` },
        };
      }
      if (check.kind === "gone") {
        return {
          done: {
            ok: false,
            alreadyStopped: false,
            lastStatus: 404,
            message: `VirtualMachine ${namespace}/${name} not found`,
          },
        };
      }
      // Still running (or unknown): the conflict rule is "retry", so the stop is sent again.
      return {
        failed: {
          status,
          message: `${answerMessage}${check.kind === "unknown" ? ` (state check failed: ${check.message})` : ""}`,
          retryAfterMs,
        },
      };
    }
    return { failed: { status, message: answerMessage, retryAfterMs } };
  }

  private async stopInEffect(
    namespace: string,
    name: string,
  ): Promise<{ kind: "stopped" | "running" | "gone" } | { kind: "unknown"; message: string }> {
    try {
      const vmObject: unknown = await this.clients.custom.getNamespacedCustomObject({
        group: "kubevirt.io",
        version: "v1",
        namespace,
        plural: "virtualmachines",
        name,
      });
      const vm = vmFacts(vmObject);
      if (!vm) return { kind: "unknown", message: "malformed VirtualMachine" };
      let vmi = null;
      try {
        vmi = vmiFacts(
          await this.clients.custom.getNamespacedCustomObject({
            group: "kubevirt.io",
            version: "v1",
            namespace,
            plural: "virtualmachineinstances",
            name,
          }),
        );
      } catch (err) {
        if (httpStatusOf(err) !== 404) throw err;
      }
      return { kind: isStopInEffect(vm, vmi) ? "stopped" : "running" };
    } catch (err) {
      if (httpStatusOf(err) === 404) return { kind: "gone" };
      return { kind: "unknown", message: describeError(err) };
    }
  }
}
