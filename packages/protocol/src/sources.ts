// The signal sources of a Report, once: each one's name (SourceStatus.source, the agent's
// `disabledSignals`, the Hello's capabilities) and the Report field it fills. The agent's sampler,
// its config check and its capabilities all read this table, so a new signal is added here once.
import type { Report } from "./gen/workstation/v1/report_pb.js";

export const REPORT_SOURCES = {
  jupyter: "jupyter",
  sessions: "sessions",
  code_server: "codeServer",
  gpu: "gpu",
  system: "system",
  inhibitors: "inhibitors",
  leases: "leases",
  disk: "disk",
  desktop: "desktop",
  remote_sessions: "remoteSessions",
} as const satisfies Record<string, keyof Report>;

export type SourceName = keyof typeof REPORT_SOURCES;

export const SOURCE_NAMES = Object.keys(REPORT_SOURCES) as readonly SourceName[];
