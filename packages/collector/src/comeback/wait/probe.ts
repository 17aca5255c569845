// The collector's own look at a starting workstation's entry service (issue 36 item 3): Ready
// must not wait for the agent's start and first Report when sshd already answers. While a start
// is pending and its VMI runs, the collector opens a TCP connection to the VM's address (the
// launcher pod's IP: with KubeVirt's default masquerade binding, the guest's ports are the pod's)
// on the probe port, and counts the service as answering once the peer sends an SSH banner. Only
// for entry services that sshd satisfies (`sshd`, `any`); Jupyter is the agent's word alone.
import net from "node:net";
import type { EntryService } from "../start/readiness.js";

/** The probe port for a VM whose entry service sshd satisfies, or undefined (no probe). Pure. */
export function probePortFor(service: EntryService, port: number): number | undefined {
  return port > 0 && (service === "sshd" || service === "any") ? port : undefined;
}

/** One look: resolves true when `host:port` answers with an SSH banner within `timeoutMs`. Never rejects. */
export function sshAnswers(host: string, port: number, timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let seen = "";
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.on("error", () => done(false));
    socket.on("close", () => done(false));
    socket.on("data", (chunk) => {
      seen += chunk.toString("latin1");
      if (seen.startsWith("SSH-")) done(true);
      else if (seen.length >= 4) done(false);
    });
  });
}

export type Look = (host: string, port: number) => Promise<boolean>;

/**
 * The looks under way and their answers, per VM: at most one look per VM at a time, and the
 * first time each start (known by when it was requested) was seen answering. Bounded by the
 * pending starts: `forget` drops a VM once its start is ready or over.
 */
export class EntryProber {
  private readonly answered = new Map<string, { startMs: number; atMs: number; detail: string }>();
  private readonly inFlight = new Set<string>();

  constructor(
    private readonly look: Look = sshAnswers,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** Starts one look at the first address (unless one is under way or this start already answered). */
  probe(id: string, startMs: number, addresses: readonly string[], port: number): void {
    const host = addresses[0];
    if (!host || this.inFlight.has(id) || this.answeredFor(id, startMs)) return;
    this.inFlight.add(id);
    void this.look(host, port).then((ok) => {
      this.inFlight.delete(id);
      if (ok)
        this.answered.set(id, {
          startMs,
          atMs: this.nowMs(),
          detail: `sshd answers on ${host.includes(":") ? `[${host}]` : host}:${port} (the collector's probe)`,
        });
    });
  }

  /** When this start's entry service was first seen answering, if it was. */
  answeredFor(id: string, startMs: number): { atMs: number; detail: string } | undefined {
    const seen = this.answered.get(id);
    return seen && seen.startMs === startMs ? { atMs: seen.atMs, detail: seen.detail } : undefined;
  }

  forget(id: string): void {
    this.answered.delete(id);
  }
}
