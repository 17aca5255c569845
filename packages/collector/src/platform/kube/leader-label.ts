/**
 * The leader's label on its own pod, which the agents' Service selects (Patroni's pattern: its
 * primary labels its pod `role=master` and the primary Service selects that label). Every
 * healthy replica is Ready, so the Deployment rolls, reports Available and satisfies a PDB; the
 * label alone decides where agents go. The label follows the election:
 *
 * - on start, a replica removes the label from its own pod: a container restarted in a pod that
 *   led before (SIGKILL, OOM) must not keep receiving agents as a standby;
 * - on becoming leader it sets the label, then removes it from every other pod of its namespace
 *   that still carries it (a leader that died without cleaning up);
 * - on stepping down and on shutdown it removes it.
 *
 * A standby that still gets an agent (Service endpoints lag the label by a moment) refuses it
 * with UNAVAILABLE, and the agent reconnects; so a stale label costs a reconnect, never a wrong
 * decision: only the Lease holder acts.
 *
 * Writes are serialized and idempotent: the wanted state is applied until it holds, with backoff
 * on retryable statuses. 403 and 404 stop the retries with one message (old RBAC without `patch`
 * on pods; a collector run outside a pod, where no Service routes to it anyway).
 */
import { PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { DEFAULT_BACKOFF, realSleep, retrying, type BackoffPolicy, type Sleep } from "../../lib/retry.js";
import { describeError, httpStatusOf, type KubeClients } from "./client.js";

/** The label the leader sets on its pod; the agents' Service (packaging/kubernetes/service.yaml) selects it. */
export const LEADER_LABEL = "workstation.aik8s.run/collector-leader";
export const LEADER_LABEL_VALUE = "true";

export interface LeaderLabelOptions {
  namespace: string;
  /** This replica's pod name (POD_NAME). */
  podName: string;
  label?: string;
  backoff?: BackoffPolicy;
  random?: () => number;
  sleep?: Sleep;
  /** Retries per wanted state before it waits for the next change (default: until it holds). */
  maxAttempts?: number;
  onError?: (message: string) => void;
  onInfo?: (message: string) => void;
}

/** The merge patch that sets (true) or removes (false) the label: metadata.labels only. */
export function leaderLabelPatch(
  label: string,
  leading: boolean,
): { metadata: { labels: Record<string, string | null> } } {
  return { metadata: { labels: { [label]: leading ? LEADER_LABEL_VALUE : null } } };
}

export class LeaderLabel {
  private readonly label: string;
  private readonly backoff: BackoffPolicy;
  private readonly random: () => number;
  private readonly sleep: Sleep;
  private wanted = false;
  /** The state last written, or null before the first write. */
  private written: boolean | null = null;
  private gaveUp = false;
  private closed = false;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly clients: KubeClients,
    private readonly options: LeaderLabelOptions,
  ) {
    this.label = options.label ?? LEADER_LABEL;
    this.backoff = options.backoff ?? DEFAULT_BACKOFF;
    this.random = options.random ?? Math.random;
    this.sleep = options.sleep ?? realSleep;
  }

  /** Whether the label is on this pod as far as this replica knows. */
  isSet(): boolean {
    return this.written === true;
  }

  /** Removes a label left from an earlier run of this pod's container. */
  start(): Promise<void> {
    return this.want(false);
  }

  /** Sets (leading) or removes the label; resolves once written, or once retries are over. */
  want(leading: boolean): Promise<void> {
    if (this.closed) return this.queue;
    this.wanted = leading;
    this.queue = this.queue.then(() => this.apply());
    return this.queue;
  }

  /** Shutdown: removes the label (a few tries only: the pod's grace period is short), then stops. */
  async close(): Promise<void> {
    this.wanted = false;
    this.closed = true;
    this.queue = this.queue.then(() => this.apply(3));
    await this.queue;
  }

  private async apply(maxAttempts = this.options.maxAttempts ?? Infinity): Promise<void> {
    const where = `pod ${this.options.namespace}/${this.options.podName}`;
    // Each wanted state gets its own retries; one that changes while a write is in flight is applied next.
    while (!this.gaveUp && this.written !== this.wanted) {
      const outcome = await retrying<"written" | "refused">(
        {
          maxAttempts,
          backoff: this.backoff,
          random: this.random,
          sleep: this.sleep,
          conflict: "retry",
          // An unbounded upkeep ends at shutdown: close() queues its own few tries.
          keepTrying: () => !(this.closed && maxAttempts === Infinity),
        },
        async (attempt) => {
          const target = this.wanted;
          try {
            await this.clients.core.patchNamespacedPod(
              {
                namespace: this.options.namespace,
                name: this.options.podName,
                body: leaderLabelPatch(this.label, target),
              },
              setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
            );
          } catch (err) {
            const status = httpStatusOf(err);
            if (status === 404 || status === 403) {
              this.gaveUp = true;
              this.report(
                status === 404
                  ? `cannot label ${where}: it does not exist (running outside a pod?); agents must reach this replica another way`
                  : `cannot label ${where}: ${describeError(err)}; grant patch on pods in this namespace (packaging/kubernetes/rbac.yaml), or the agents' Service has no endpoint`,
              );
              return { done: "refused" };
            }
            this.report(
              `${target ? "setting" : "removing"} the leader label on ${where} (attempt ${attempt}): ${describeError(err)}`,
            );
            // No Retry-After: the label's upkeep keeps its own pace.
            return { failed: { status, message: describeError(err) } };
          }
          this.written = target;
          if (target) await this.clearStale();
          return { done: "written" };
        },
      );
      if ("failed" in outcome) return;
    }
  }

  /** A new leader takes the label off pods that still carry it: their replica died while leading. */
  private async clearStale(): Promise<void> {
    const { namespace, podName } = this.options;
    let names: string[];
    try {
      const pods = await this.clients.core.listNamespacedPod({
        namespace,
        labelSelector: `${this.label}=${LEADER_LABEL_VALUE}`,
      });
      names = pods.items.map((pod) => pod.metadata?.name ?? "").filter((name) => name !== "" && name !== podName);
    } catch (err) {
      this.report(`listing pods with the leader label in ${namespace}: ${describeError(err)}`);
      return;
    }
    for (const name of names) {
      try {
        await this.clients.core.patchNamespacedPod(
          { namespace, name, body: leaderLabelPatch(this.label, false) },
          setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
        );
        this.options.onInfo?.(`removed the stale leader label from pod ${namespace}/${name}`);
      } catch (err) {
        if (httpStatusOf(err) !== 404)
          this.report(`removing the stale leader label from pod ${namespace}/${name}: ${describeError(err)}`);
      }
    }
  }

  private report(message: string): void {
    try {
      this.options.onError?.(message);
    } catch {
      // A broken logger must not break the label's upkeep.
    }
  }
}
