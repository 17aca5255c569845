// One human line per signal source for `ws-agent probe`. Root runs it inside the VM: process
// names, users, kernel names and mount points are what any user there chose, so each line's
// detail goes through terminalText (an OSC 52 in a process name must not reach root's terminal).
import { SourceState, terminalText, type Report } from "@ws/protocol";

const STATE_WORD: Record<number, string> = {
  [SourceState.OK]: "ok",
  [SourceState.ABSENT]: "absent",
  [SourceState.FAILED]: "FAILED",
  [SourceState.DISABLED]: "disabled",
  [SourceState.UNSPECIFIED]: "?",
};

const age = (seconds: number | undefined) => (seconds === undefined ? "never" : `${Math.round(seconds)}s ago`);
const pct = (ratio: number | undefined) => (ratio === undefined ? "n/a" : `${(ratio * 100).toFixed(0)}%`);
const bytesRate = (value: number | undefined) => (value === undefined ? "n/a" : `${(value / 1024).toFixed(1)} KiB/s`);
const gib = (bytes: bigint | number) => `${(Number(bytes) / 2 ** 30).toFixed(1)} GiB`;

export function summarize(report: Report, source: string): string {
  switch (source) {
    case "jupyter": {
      const servers = report.jupyter?.servers ?? [];
      const kernels = servers.flatMap((s) => s.kernels);
      const busy = kernels.filter((k) => k.executionState === "busy").length;
      const unreachable = servers.filter((s) => !s.reachable).length;
      return `${servers.length} server(s), ${kernels.length} kernel(s) (${busy} busy), ${servers.reduce((n, s) => n + s.terminals.length, 0)} terminal(s)${unreachable ? `, ${unreachable} unreachable` : ""}`;
    }
    case "sessions": {
      const sessions = report.sessions?.sessions ?? [];
      const youngest = Math.min(...sessions.map((s) => s.inputAgeSeconds ?? Infinity));
      return `${sessions.length} terminal(s), last input ${Number.isFinite(youngest) ? age(youngest) : "never"}`;
    }
    case "remote_sessions": {
      const sessions = report.remoteSessions?.sessions ?? [];
      const youngest = Math.min(...sessions.map((s) => s.interactionAgeSeconds ?? Infinity));
      const machine = sessions.flatMap((s) => [
        ...(s.judgedByService ? s.forwards.map((f) => `forward to ${f.service} :${f.destinationPort}`) : []),
        ...(s.cadence ? [`regular every ${Math.round(s.cadence.periodSeconds)}s`] : []),
      ]);
      return `${sessions.length} session(s) without a terminal, last interaction ${Number.isFinite(youngest) ? age(youngest) : "never"}${machine.length ? ` (machine traffic: ${machine.join(", ")})` : ""}`;
    }
    case "desktop": {
      const devices = report.desktop?.devices ?? [];
      const youngest = Math.min(...devices.map((d) => d.inputAgeSeconds ?? Infinity));
      return `${devices.length} input device(s), last input ${Number.isFinite(youngest) ? age(youngest) : "never"}${report.desktop?.locked ? ", screen locked" : ""}`;
    }
    case "code_server": {
      const instances = report.codeServer?.instances ?? [];
      return instances.map((i) => `${i.user}: heartbeat ${age(i.heartbeatAgeSeconds)}`).join(", ") || "no heartbeat";
    }
    case "gpu": {
      const gpus = report.gpu?.gpus ?? [];
      return `${gpus.length} GPU(s)${gpus.length ? `: ${gpus.map((g) => `#${g.index} ${pct(g.utilizationRatio)}`).join(" ")}` : ""}, ${report.gpu?.processes.length ?? 0} process(es)`;
    }
    case "system": {
      const s = report.system;
      if (!s) return "";
      const top = s.topProcesses[0];
      return `cpu ${pct(s.cpuBusyRatio)} of ${s.cpuCount}, load ${s.load1.toFixed(2)}, net ${bytesRate(
        (s.networkReceiveBytesPerSecond ?? 0) + (s.networkTransmitBytesPerSecond ?? 0),
      )}, disk ${bytesRate((s.diskReadBytesPerSecond ?? 0) + (s.diskWriteBytesPerSecond ?? 0))}${
        top ? `, top ${top.user}/${top.command} ${top.cpuCores.toFixed(2)} cores` : ""
      }`;
    }
    case "inhibitors":
      return `${report.inhibitors?.locks.length ?? 0} idle inhibitor lock(s)`;
    case "leases": {
      const leases = report.leases?.leases ?? [];
      return `${leases.length} lease(s)`;
    }
    case "disk":
      return (report.disk?.mounts ?? [])
        .map((m) => `${m.mountPoint} ${gib(m.usedBytes)}/${gib(m.sizeBytes)}`)
        .join(", ");
    default:
      return "";
  }
}

export function describeSources(report: Report): string {
  const lines = report.sources.map((s) => {
    const detail = s.state === SourceState.OK ? summarize(report, s.source) : s.message;
    return `${terminalText(s.source, 40).padEnd(16)} ${(STATE_WORD[s.state] ?? "?").padEnd(9)} ${terminalText(detail, 1000)}`;
  });
  return `${lines.join("\n")}\n`;
}
