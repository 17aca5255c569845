import { readFile } from "node:fs/promises";
import path from "node:path";
import { describeFailure, type CommandRunner } from "./exec.js";
import { filesystemBytes } from "./facts.js";
import { parseGrowpartOutput } from "./growpart.js";
import { LVS_FIELDS, PVS_FIELDS, VGS_FIELDS, parseLvsJson, parsePvsJson, parseVgsJson } from "./lvm.js";
import type { GrowStep, MountPlan, PlannedStep } from "./plan.js";
import type { ToolPaths } from "./tools.js";

export type StepOutcome = "changed" | "unchanged" | "failed" | "planned";

export interface StepResult {
  description: string;
  kind: GrowStep["kind"];
  commands: string[][];
  outcome: StepOutcome;
  /** What the tool said, or why it failed. */
  detail: string;
  /** Size of what the step grows, before and after, in bytes (partition, PV, LV or filesystem). */
  bytesBefore: number | null;
  bytesAfter: number | null;
}

export type MountStatus = "grown" | "unchanged" | "refused" | "failed" | "planned";

export interface MountResult {
  requested: string;
  mountPoint: string | null;
  fsType: string | null;
  device: string | null;
  status: MountStatus;
  steps: StepResult[];
  refusals: string[];
  notes: string[];
  /** statfs total size (what df shows) before and after. */
  filesystemBytesBefore: number | null;
  filesystemBytesAfter: number | null;
}

/** Measures what a step grows; the thin edge the executor reads sizes through. */
export interface GrowProbe {
  partitionBytes(partitionPath: string): Promise<number | null>;
  physicalVolumeBytes(pv: string): Promise<number | null>;
  logicalVolumeBytes(device: string): Promise<number | null>;
  volumeGroupFree(vg: string): Promise<{ freeBytes: number; extentBytes: number } | null>;
  filesystemBytes(mountPoint: string): Promise<number | null>;
}

export function systemProbe(sysRoot: string, tools: ToolPaths, run: CommandRunner): GrowProbe {
  const lvm = async (binary: string | null, args: string[]): Promise<string | null> => {
    if (!binary) return null;
    const result = await run([binary, "--reportformat", "json", "--units", "b", "--nosuffix", ...args]);
    return result.exitCode === 0 ? result.stdout : null;
  };
  return {
    async partitionBytes(partitionPath) {
      try {
        const sectors = Number(
          (await readFile(path.join(sysRoot, "class", "block", path.basename(partitionPath), "size"), "utf8")).trim(),
        );
        return Number.isFinite(sectors) ? sectors * 512 : null;
      } catch {
        return null;
      }
    },
    async physicalVolumeBytes(pv) {
      const text = await lvm(tools.pvs, ["-o", PVS_FIELDS, pv]);
      return text === null ? null : (parsePvsJson(text).find((entry) => entry.path === pv)?.sizeBytes ?? null);
    },
    async logicalVolumeBytes(device) {
      const text = await lvm(tools.lvs, ["--segments", "-o", LVS_FIELDS]);
      return text === null ? null : (parseLvsJson(text).find((entry) => entry.dmPath === device)?.sizeBytes ?? null);
    },
    async volumeGroupFree(vg) {
      const text = await lvm(tools.vgs, ["-o", VGS_FIELDS, vg]);
      const group = text === null ? undefined : parseVgsJson(text).find((entry) => entry.vg === vg);
      return group ? { freeBytes: group.freeBytes, extentBytes: group.extentBytes } : null;
    },
    filesystemBytes,
  };
}

function measure(probe: GrowProbe, step: GrowStep): Promise<number | null> {
  switch (step.kind) {
    case "grow-partition":
    case "tell-kernel":
      return probe.partitionBytes(step.partitionPath);
    case "pvresize":
      return probe.physicalVolumeBytes(step.pv);
    case "lvextend":
      return probe.logicalVolumeBytes(step.device);
    case "grow-filesystem":
      return probe.filesystemBytes(step.mountPoint);
  }
}

function lastLines(text: string, count = 2): string {
  return text
    .trim()
    .split("\n")
    .filter((line) => line.trim() !== "")
    .slice(-count)
    .join(" | ");
}

async function runStep(planned: PlannedStep, run: CommandRunner, probe: GrowProbe): Promise<StepResult> {
  const { step } = planned;
  const result: StepResult = {
    description: planned.description,
    kind: step.kind,
    commands: planned.commands.map((command) => command.argv),
    outcome: "failed",
    detail: "",
    bytesBefore: await measure(probe, step),
    bytesAfter: null,
  };
  if (step.kind === "lvextend") {
    // Taking "+100%FREE" of nothing is an error in lvextend; nothing to take is success here.
    const free = await probe.volumeGroupFree(step.vg);
    if (free && free.freeBytes < free.extentBytes) {
      return {
        ...result,
        outcome: "unchanged",
        detail: `volume group ${step.vg} has no free extents`,
        bytesAfter: result.bytesBefore,
      };
    }
  }
  const details: string[] = [];
  for (const command of planned.commands) {
    const output = await run(command.argv, command.input === undefined ? {} : { input: command.input });
    if (step.kind === "grow-partition" && step.via === "growpart") {
      const verdict = parseGrowpartOutput(`${output.stdout}\n${output.stderr}`, output.exitCode);
      result.bytesAfter = await measure(probe, step);
      if (verdict.outcome === "failed")
        return {
          ...result,
          outcome: "failed",
          detail: output.error ? describeFailure(command.argv, output) : verdict.line,
        };
      return { ...result, outcome: verdict.outcome === "changed" ? "changed" : "unchanged", detail: verdict.line };
    }
    if (output.exitCode !== 0) {
      result.bytesAfter = await measure(probe, step);
      return { ...result, outcome: "failed", detail: describeFailure(command.argv, output) };
    }
    const said = lastLines(`${output.stdout}\n${output.stderr}`);
    if (said) details.push(said);
  }
  result.bytesAfter = await measure(probe, step);
  const grew = result.bytesBefore !== null && result.bytesAfter !== null && result.bytesAfter > result.bytesBefore;
  return { ...result, outcome: grew ? "changed" : "unchanged", detail: details.join(" | ") };
}

function plannedResult(planned: PlannedStep): StepResult {
  return {
    description: planned.description,
    kind: planned.step.kind,
    commands: planned.commands.map((command) => command.argv),
    outcome: "planned",
    detail: "",
    bytesBefore: null,
    bytesAfter: null,
  };
}

function statusOf(steps: StepResult[], refusals: string[]): MountStatus {
  if (steps.some((step) => step.outcome === "failed")) return "failed";
  if (refusals.length > 0) return "refused";
  if (steps.some((step) => step.outcome === "planned")) return "planned";
  return steps.some((step) => step.outcome === "changed") ? "grown" : "unchanged";
}

/**
 * Runs each mount's steps in order. A failed step is reported and the later steps still run:
 * each of them is safe on its own (growing a filesystem that has no room is a no-op).
 */
export async function executeGrow(
  plans: MountPlan[],
  options: { dryRun: boolean; run: CommandRunner; probe: GrowProbe },
): Promise<MountResult[]> {
  const results: MountResult[] = [];
  for (const plan of plans) {
    const before = plan.mountPoint ? await options.probe.filesystemBytes(plan.mountPoint) : null;
    const steps: StepResult[] = [];
    for (const planned of plan.steps) {
      steps.push(options.dryRun ? plannedResult(planned) : await runStep(planned, options.run, options.probe));
    }
    const after = plan.mountPoint && !options.dryRun ? await options.probe.filesystemBytes(plan.mountPoint) : before;
    results.push({
      requested: plan.requested,
      mountPoint: plan.mountPoint,
      fsType: plan.fsType,
      device: plan.device,
      status: statusOf(steps, plan.refusals),
      steps,
      refusals: plan.refusals,
      notes: plan.notes,
      filesystemBytesBefore: before,
      filesystemBytesAfter: after,
    });
  }
  return results;
}

export function growExitCode(results: MountResult[]): 0 | 1 {
  return results.every(
    (result) => result.status === "grown" || result.status === "unchanged" || result.status === "planned",
  )
    ? 0
    : 1;
}
