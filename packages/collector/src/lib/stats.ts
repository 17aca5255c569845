import type { UnhandledErrorCounts } from "@ws/protocol";

/** Collector self-counters; the metrics module reads them at scrape time. */
export class CollectorStats {
  streamsOpened = 0;
  reportsReceived = 0;
  reportDecodeFailures = 0;
  reportValidationFailures = 0;
  authFailures = new Map<string, number>();
  /** Report fields cut to the per-agent limits, by field name (bounded: the fields are a fixed list). */
  truncations = new Map<string, number>();
  /** Hellos answered RESOURCE_EXHAUSTED with a retry hint (the admission limit was reached). */
  streamsRefusedBusy = 0;
  /** Agent TCP connections closed right after accept: the gRPC port held its cap (agents/connection-cap.ts). */
  agentConnectionsRefused = 0;
  /** Agent connections closed at accept: their source address held its share of unauthenticated ones (grpc.maxPendingConnectionsPerSource). */
  agentConnectionsRefusedPerSource = 0;
  /** Agent connections closed because no Hello authenticated on them within grpc.handshakeTimeout. */
  agentConnectionsDeadlineClosed = 0;
  /** Agent connections closed to make room: "cap" (the oldest unauthenticated one, for a new connection), "same-vm" (a newer one authenticated as its VM). */
  agentConnectionsEvicted = new Map<"cap" | "same-vm", number>();
  /** Reports dropped because one stream sent faster than MAX_REPORTS_PER_SECOND or MAX_REPORT_BYTES_PER_SECOND. */
  reportsRateLimited = 0;
  kubeRequests = new Map<string, number>();
  /** HTTP requests refused before or outside a route, by reason (a fixed list: serve/router.ts HttpRefusal). */
  httpRefused = new Map<string, number>();
  /** Errors nobody handled in this process (installUnhandledErrorPolicy counts into it). */
  unhandledErrors: UnhandledErrorCounts = { rejection: 0, exception: 0 };
  /** Errors nobody handled in agents, as their Reports count them (increases summed over streams). */
  agentUnhandledErrors = 0;
  /** Decision durations since the last scrape; the metrics module drains them into a histogram. */
  pendingDecisionSeconds: number[] = [];

  countTruncation(field: string): void {
    this.truncations.set(field, (this.truncations.get(field) ?? 0) + 1);
  }

  countConnectionEviction(reason: "cap" | "same-vm"): void {
    this.agentConnectionsEvicted.set(reason, (this.agentConnectionsEvicted.get(reason) ?? 0) + 1);
  }

  countAuthFailure(reason: string): void {
    this.authFailures.set(reason, (this.authFailures.get(reason) ?? 0) + 1);
  }

  observeDecision(seconds: number): void {
    // Bounded: without scrapes the oldest figures are dropped, not memory.
    if (this.pendingDecisionSeconds.length < 100_000) this.pendingDecisionSeconds.push(seconds);
  }

  /**
   * Outcomes of stops carried out, per VM ("namespace/name" → outcome → count):
   * the metrics module exports them for the VMs that still exist.
   */
  stopOutcomes = new Map<string, Map<string, number>>();

  countStopOutcome(vm: { namespace: string; name: string }, outcome: string): void {
    const key = `${vm.namespace}/${vm.name}`;
    const counts = this.stopOutcomes.get(key) ?? new Map<string, number>();
    counts.set(outcome, (counts.get(outcome) ?? 0) + 1);
    this.stopOutcomes.set(key, counts);
  }

  countHttpRefusal(reason: string): void {
    this.httpRefused.set(reason, (this.httpRefused.get(reason) ?? 0) + 1);
  }

  countKubeRequest(verb: string, code: string): void {
    const key = `${verb}|${code}`;
    this.kubeRequests.set(key, (this.kubeRequests.get(key) ?? 0) + 1);
  }
}
