// Benchmark 2's realistic fleet (issue 35): what each simulated VM is doing, and the Report it
// samples at a moment. Most VMs are idle or steady, some have a person typing, some run a GPU job
// that starts and ends, some have a stop pending (the collector hears every sample from them),
// some take a lease, a few agents restart and one in a hundred is an agent from before reports on
// change. The worst case (today's: every VM sends a full Report every interval) stays the other mix.
import { clone, create } from "@bufbuild/protobuf";
import { ReportSchema, type Report } from "@ws/protocol";

export type Profile = "steady" | "typing" | "gpu-job" | "pending-stop" | "lease" | "restarting" | "old-agent";

/** Per hundred VMs. */
export const REALISTIC_MIX: ReadonlyArray<readonly [Profile, number]> = [
  ["steady", 60],
  ["typing", 20],
  ["gpu-job", 8],
  ["pending-stop", 5],
  ["lease", 4],
  ["restarting", 2],
  ["old-agent", 1],
];

/** The mix in words, for the results. */
export const REALISTIC_MIX_TEXT =
  "60 % idle or steady (sessions, Jupyter and code-server open, nothing over a threshold), 20 % with a person typing, " +
  "8 % with a GPU job that starts and ends every 2–6 minutes, 5 % with a stop pending and a person coming back " +
  "(the collector asks them for every sample, as it does while a notice is shown), 4 % taking a lease, " +
  "2 % whose agent restarts every 3–6 minutes, 1 % agents from before reports on change (every sample)";

/** The profile of the VM numbered `index`: the mix, interleaved so every slice of the fleet has it. */
export function profileOf(index: number): Profile {
  let slot = index % 100;
  for (const [profile, share] of REALISTIC_MIX) {
    if (slot < share) return profile;
    slot -= share;
  }
  return "steady";
}

/** The template with nothing over a threshold: idle kernels, an idle GPU, a quiet machine. */
export function quietReport(template: Report): Report {
  const report = clone(ReportSchema, template);
  for (const server of report.jupyter?.servers ?? [])
    for (const kernel of server.kernels) {
      kernel.executionState = "idle";
      kernel.connections = 0;
    }
  if (report.gpu) {
    for (const gpu of report.gpu.gpus) gpu.utilizationRatio = 0;
    report.gpu.processes = [];
  }
  if (report.system) {
    report.system.cpuBusyRatio = 0.02;
    report.system.userProcessCpuCores = 0.05;
    report.system.networkReceiveBytesPerSecond = 2_000;
    report.system.networkTransmitBytesPerSecond = 1_000;
    report.system.diskReadBytesPerSecond = 10_000;
    report.system.diskWriteBytesPerSecond = 20_000;
  }
  return report;
}

/** The quiet template with a keystroke a moment ago in its first session. */
export function typingReport(quiet: Report): Report {
  const report = clone(ReportSchema, quiet);
  const first = report.sessions?.sessions[0];
  if (first) first.inputAgeSeconds = 0.4;
  return report;
}

/** The quiet template holding one lease of 8 hours, taken `ageSeconds` ago. */
export function leaseReport(quiet: Report, id: string, ageSeconds: number): Report {
  const report = clone(ReportSchema, quiet);
  report.leases = create(ReportSchema, {
    leases: {
      leases: [
        {
          id,
          uid: 1000,
          user: "alice",
          reason: "overnight run",
          requestedSeconds: 8 * 3600,
          ageSeconds,
          confirmed: true,
        },
      ],
    },
  }).leases;
  return report;
}
