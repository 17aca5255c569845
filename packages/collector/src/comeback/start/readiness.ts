// Is the workstation's entry service up, as its agent reports it? "Ready" on the starting page
// means this, not merely a running VMI: the guest booted, the agent runs, and the service the
// person will use answers (sshd listens; the Jupyter server answered the agent's query). Pure.
import type { Report } from "@ws/protocol";

/** Which service decides readiness: a VM's `entry-service` annotation or its profile's (start config). */
export type EntryService = "any" | "sshd" | "jupyter";

export const ENTRY_SERVICES: readonly EntryService[] = ["any", "sshd", "jupyter"];

export interface Readiness {
  ready: boolean;
  /** What answers ("sshd listening on 22", "Jupyter at http://…:8888/ answers"), or what is awaited. */
  detail: string;
}

export function entryReadiness(report: Report | undefined, service: EntryService): Readiness {
  if (!report) return { ready: false, detail: "no report from the agent yet" };
  const ports = report.remoteSessions?.sshdListeningPorts ?? [];
  const jupyter = (report.jupyter?.servers ?? []).find((server) => server.reachable);
  const sshd = ports.length > 0 ? `sshd listening on ${ports.join(", ")}` : undefined;
  const notebook = jupyter ? `Jupyter at ${jupyter.url} answers` : undefined;
  const wanted = service === "sshd" ? sshd : service === "jupyter" ? notebook : (notebook ?? sshd);
  if (wanted) return { ready: true, detail: wanted };
  const awaited =
    service === "sshd"
      ? "sshd to listen"
      : service === "jupyter"
        ? "the Jupyter server to answer"
        : "sshd or Jupyter to answer";
  return { ready: false, detail: `waiting for ${awaited}` };
}
