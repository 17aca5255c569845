// A VM's latest Report as the collector keeps it between Reports: the bytes it arrived as
// (~1.3 kB for a typical Report) and the few figures the views and /metrics read, instead of the
// decoded message (~7 kB of heap: every session, kernel, process and mount as objects). The
// engine decides on the decoded Report when it arrives; afterwards only a deadline, a policy
// change or a VM page needs it again, and `report` decodes it then (tens of microseconds).
//
// Only Reports that validation kept whole are compacted: a truncated one differs from its bytes,
// so it stays decoded (a hostile agent's; they are bounded by validation).
import { AgentMessageSchema, decodeMessage, type Report } from "@ws/protocol";
import type { ReceivedReport } from "../engine/types.js";
import type { VmView } from "./vm-view.js";
import { readingsFromReport, type ReportReadings } from "./readings.js";

/** What views and /metrics read of the latest Report. */
export interface ReportSummary {
  gpus: VmView["gpus"];
  disks: VmView["disks"];
  /** GPUs the Report lists; undefined when it has no GPU section. */
  gpuCount: number | undefined;
  readings: ReportReadings;
}

const wire = new WeakMap<Report, Uint8Array>();

/** Ties a Report to the AgentMessage bytes it was decoded from (agents/server.ts, for Reports kept whole). */
export function rememberWire(report: Report, agentMessageBytes: Uint8Array): void {
  wire.set(report, agentMessageBytes);
}

export function summarizeReport(report: Report, receivedAtMs: number): ReportSummary {
  return {
    gpus: (report.gpu?.gpus ?? [])
      .filter((g) => g.utilizationRatio !== undefined)
      .map((g) => ({ gpu: String(g.index), utilizationRatio: g.utilizationRatio! })),
    disks: (report.disk?.mounts ?? [])
      .filter((m) => m.sizeBytes > 0n)
      .map((m) => ({ mount: m.mountPoint, usedRatio: Number(m.usedBytes) / Number(m.sizeBytes) })),
    gpuCount: report.gpu ? report.gpu.gpus.length : undefined,
    readings: readingsFromReport(report, receivedAtMs),
  };
}

export class CompactReport implements ReceivedReport {
  constructor(
    readonly receivedAtMs: number,
    private readonly bytes: Uint8Array,
    readonly summary: ReportSummary,
  ) {}

  /** The Report, decoded again from its bytes (not kept: the point is not to hold it). */
  get report(): Report {
    const message = decodeMessage(AgentMessageSchema, this.bytes);
    if (message.payload.case !== "report") throw new Error("compact report: the kept bytes are not a Report");
    return message.payload.value;
  }

  get byteLength(): number {
    return this.bytes.byteLength;
  }
}

/** The compact form of a received Report when its bytes are known, else the Report as it is. */
export function compactReport(received: ReceivedReport): ReceivedReport {
  if (received instanceof CompactReport) return received;
  const bytes = wire.get(received.report);
  if (!bytes) return received;
  return new CompactReport(received.receivedAtMs, bytes, summarizeReport(received.report, received.receivedAtMs));
}

/** What views read of a received Report, compact or not. */
export function reportSummary(received: ReceivedReport): ReportSummary {
  return received instanceof CompactReport ? received.summary : summarizeReport(received.report, received.receivedAtMs);
}
