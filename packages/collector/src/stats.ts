/** Collector self-counters; the metrics module reads them at scrape time. */
export class CollectorStats {
  streamsOpened = 0;
  reportsReceived = 0;
  reportDecodeFailures = 0;
  reportValidationFailures = 0;
  authFailures = new Map<string, number>();
  kubeRequests = new Map<string, number>();
  decisionSeconds: number[] = [];

  countAuthFailure(reason: string): void {
    this.authFailures.set(reason, (this.authFailures.get(reason) ?? 0) + 1);
  }

  countKubeRequest(verb: string, code: string): void {
    const key = `${verb}|${code}`;
    this.kubeRequests.set(key, (this.kubeRequests.get(key) ?? 0) + 1);
  }
}
