// What a stop will end, as the notice and the webhook say it before the stop: terminal sessions
// (logins, and tmux/screen/IDE panes: ptys with no login record), Jupyter kernels and
// terminals, and each user's processes by name and count — never arguments or content. Read
// from the VM's latest Report. Pure.
import type { Report } from "@ws/protocol";
import { SessionKind } from "@ws/protocol";

/** Names listed per user at most; the rest is counted. */
const MAX_NAMES = 5;

export interface StopEnds {
  /** One line: "alice: 2 logins, 3 tmux/screen panes, processes python3 ×2, tmux; Jupyter: 2 kernels (python3), 1 terminal". */
  text: string;
  /** The same, as data for the JSON webhook. */
  users: Array<{ user: string; logins: number; panes: number; processes: Array<{ name: string; count: number }> }>;
  jupyter: { kernels: number; busyKernels: number; terminals: number; kernelNames: string[] };
}

export function stopEnds(report: Report | undefined): StopEnds | undefined {
  if (!report) return undefined;
  const users = new Map<string, { logins: number; panes: number; processes: Map<string, number> }>();
  const of = (user: string) => {
    const known = users.get(user);
    if (known) return known;
    const entry = { logins: 0, panes: 0, processes: new Map<string, number>() };
    users.set(user, entry);
    return entry;
  };
  for (const session of report.sessions?.sessions ?? []) {
    if (!session.user) continue;
    if (session.kind === SessionKind.PTY) of(session.user).panes++;
    else of(session.user).logins++;
  }
  for (const process of report.system?.topProcesses ?? []) {
    if (!process.user || !process.command) continue;
    const names = of(process.user).processes;
    names.set(process.command, (names.get(process.command) ?? 0) + 1);
  }
  const servers = report.jupyter?.servers ?? [];
  const kernels = servers.flatMap((server) => server.kernels);
  const jupyter = {
    kernels: kernels.length,
    busyKernels: kernels.filter((kernel) => kernel.executionState === "busy").length,
    terminals: servers.reduce((n, server) => n + server.terminals.length, 0),
    kernelNames: [...new Set(kernels.map((kernel) => kernel.name).filter(Boolean))].slice(0, MAX_NAMES),
  };
  const userRows = [...users.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([user, entry]) => ({
      user,
      logins: entry.logins,
      panes: entry.panes,
      processes: [...entry.processes.entries()]
        .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
        .map(([name, count]) => ({ name, count })),
    }));
  const parts: string[] = [];
  for (const row of userRows) {
    const bits: string[] = [];
    if (row.logins) bits.push(`${row.logins} login${row.logins === 1 ? "" : "s"}`);
    if (row.panes) bits.push(`${row.panes} tmux/screen/IDE terminal${row.panes === 1 ? "" : "s"}`);
    if (row.processes.length) {
      const shown = row.processes.slice(0, MAX_NAMES).map((p) => (p.count > 1 ? `${p.name} ×${p.count}` : p.name));
      const more = row.processes.length - shown.length;
      bits.push(`processes ${shown.join(", ")}${more > 0 ? ` and ${more} more` : ""}`);
    }
    if (bits.length) parts.push(`${row.user}: ${bits.join(", ")}`);
  }
  if (jupyter.kernels || jupyter.terminals) {
    const bits: string[] = [];
    if (jupyter.kernels)
      bits.push(
        `${jupyter.kernels} kernel${jupyter.kernels === 1 ? "" : "s"}${jupyter.kernelNames.length ? ` (${jupyter.kernelNames.join(", ")})` : ""}${jupyter.busyKernels ? `, ${jupyter.busyKernels} busy` : ""}`,
      );
    if (jupyter.terminals) bits.push(`${jupyter.terminals} terminal${jupyter.terminals === 1 ? "" : "s"}`);
    parts.push(`Jupyter: ${bits.join(", ")}`);
  }
  return { text: parts.length ? parts.join("; ") : "nothing that ws can see running", users: userRows, jupyter };
}
