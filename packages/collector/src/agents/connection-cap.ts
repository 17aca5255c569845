// How many agent connections the collector holds at once, decided from its open-file limit and
// its config (pure; serve.ts reads /proc/self/limits, agents/server.ts enforces the cap).
//
// Every agent connection is one file descriptor. A process at its open-file limit cannot open
// anything else either: the leader election's Lease renewals fail with `connect EMFILE`, the
// replica loses its Lease and every agent reconnects at once. So the collector refuses agents
// past a cap that keeps a reserve of descriptors for everything else, and says at start when
// that cap cannot hold the fleet.

/**
 * Descriptors kept for what is not an agent: the API server's connections (watches, writes, the
 * Lease thread's own), /metrics scrapes and probes, the pages' visitors, webhooks, files, the
 * runtime's own (epoll, pipes, the worker thread). Under 2,048 files, half the limit instead.
 */
export const OPEN_FILE_RESERVE = 1024;

export type ConnectionCapSource = "grpc.maxConnections" | "open-file limit" | "none";

export interface AgentConnectionCap {
  /** The most agent connections held at once; undefined: no cap (the open-file limit is unknown or unlimited). */
  limit: number | undefined;
  source: ConnectionCapSource;
  /** The process's open-file soft limit ("Max open files"), when known. */
  openFileLimit: number | undefined;
  /** Descriptors the cap leaves for the rest of the process (the open-file limit's share; 0 without one). */
  reserve: number;
}

/**
 * The soft "Max open files" of a /proc/PID/limits text (Node raises the soft limit to the hard one
 * at start, so this is what the process can open); Infinity for "unlimited", undefined when absent.
 */
export function parseOpenFileLimit(limitsText: string): number | undefined {
  const line = limitsText.split("\n").find((row) => row.startsWith("Max open files"));
  const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
  if (soft === "unlimited") return Number.POSITIVE_INFINITY;
  if (soft === undefined || !/^\d+$/.test(soft)) return undefined;
  return Number(soft);
}

/** The descriptors kept for the rest of the process under an open-file limit. */
export function openFileReserve(openFileLimit: number): number {
  return Math.min(OPEN_FILE_RESERVE, Math.floor(openFileLimit / 2));
}

/** grpc.maxConnections when set, else the open-file limit less its reserve, else no cap. */
export function agentConnectionCap(
  openFileLimit: number | undefined,
  configured: number | undefined,
): AgentConnectionCap {
  const finite = openFileLimit !== undefined && Number.isFinite(openFileLimit) ? openFileLimit : undefined;
  const reserve = finite === undefined ? 0 : openFileReserve(finite);
  if (configured !== undefined) return { limit: configured, source: "grpc.maxConnections", openFileLimit, reserve };
  if (finite === undefined) return { limit: undefined, source: "none", openFileLimit, reserve };
  return { limit: Math.max(1, finite - reserve), source: "open-file limit", openFileLimit, reserve };
}

/** The cap in words, for the "collector serving" line. */
export function describeConnectionCap(cap: AgentConnectionCap): string {
  if (cap.limit === undefined)
    return cap.openFileLimit === undefined ? "no cap (open-file limit unknown)" : "no cap (open-file limit unlimited)";
  if (cap.source === "grpc.maxConnections") return `${cap.limit} (grpc.maxConnections)`;
  return `${cap.limit} (open-file limit ${cap.openFileLimit} less ${cap.reserve})`;
}

const RAISE_NOFILE =
  "raise the container's open-file limit (nofile: the container runtime's default ulimits, e.g. LimitNOFILE= in containerd's or CRI-O's systemd unit; docs/install.md, Sizing)";

/**
 * What to log at start about the cap, given the VMs whose agents may connect: nothing when it
 * holds them all; else what happens and what to do, with the numbers.
 */
export function connectionCapWarnings(cap: AgentConnectionCap, vms: number): string[] {
  const warnings: string[] = [];
  const { limit, openFileLimit, reserve } = cap;
  if (limit === undefined) return warnings;
  const finiteLimit = openFileLimit !== undefined && Number.isFinite(openFileLimit) ? openFileLimit : undefined;
  if (cap.source === "grpc.maxConnections" && finiteLimit !== undefined && limit > finiteLimit - reserve)
    warnings.push(
      `grpc.maxConnections (${limit}) leaves fewer than ${reserve} of the open-file limit (${finiteLimit}) for the API server, the Lease renewals, scrapes and files: with that many agents connected they fail with EMFILE and the leader can lose its Lease; lower grpc.maxConnections to ${Math.max(1, finiteLimit - reserve)} or ${RAISE_NOFILE} to at least ${limit + reserve}`,
    );
  if (vms <= limit) return warnings;
  const refused = `agents past ${limit} are refused right after they connect and retry with backoff (workstation_agent_connections_refused_total)`;
  if (cap.source === "open-file limit")
    warnings.push(
      `the open-file limit (${finiteLimit}) holds ${limit} agent connections (${reserve} kept for the rest of the collector), fewer than the ${vms} VMs it serves: ${refused}; ${RAISE_NOFILE} to at least ${vms + reserve}`,
    );
  else {
    const nofile =
      finiteLimit !== undefined && vms + reserve > finiteLimit
        ? ` and ${RAISE_NOFILE} to at least ${vms + reserve}`
        : "";
    warnings.push(
      `grpc.maxConnections (${limit}) is below the ${vms} VMs this collector serves: ${refused}; raise grpc.maxConnections to at least ${vms}${nofile}`,
    );
  }
  return warnings;
}
