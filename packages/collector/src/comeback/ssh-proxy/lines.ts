// What the ssh helper tells the person at the terminal: one line per stage as it completes, the
// scheduler's message once when the VM cannot be placed. Pure: the previous and the current
// progress in, the new lines out. Each line goes through terminalText: a stage's detail and the
// scheduler's message come from the cluster, not from ws.
import { terminalText } from "@ws/protocol";
import type { StartJson } from "../start/handler.js";

const clock = (ms: number) => new Date(ms).toISOString().slice(11, 19);

export function progressLines(previous: StartJson | undefined, current: StartJson): string[] {
  const lines: string[] = [];
  for (const stage of current.stages) {
    const before = previous?.stages.find((s) => s.name === stage.name);
    if (stage.state === "done" && before?.state !== "done")
      lines.push(
        `ws: ✓ ${stage.label}${stage.atMs !== undefined ? ` ${clock(stage.atMs)}` : ""}${stage.detail ? ` (${stage.detail})` : ""}`,
      );
  }
  if (current.unschedulable && !previous?.unschedulable)
    lines.push(`ws: ✗ the scheduler cannot place the VM yet: ${current.unschedulable.message} — waiting for room`);
  if (!current.unschedulable && previous?.unschedulable) lines.push("ws: there is room now");
  if (current.failure && !previous?.failure) lines.push(`ws: ✗ the start failed: ${current.failure}`);
  return lines.map((line) => terminalText(line, 1000));
}
