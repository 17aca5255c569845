/**
 * The pure half of the GPU signal (gpu.ts reads): nvidia-smi's CSV answers, and what one of its
 * runs means (answered, not installed, no GPU, failed). Tested on output captured from real
 * drivers (test/signals/gpu.test.ts, fixtures/gpu).
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { GpuProcessSchema, GpuSchema } from "@ws/protocol";
import type { CommandResult } from "./run-bounded.js";

export type GpuInit = MessageInitShape<typeof GpuSchema>;
export type GpuProcessInit = MessageInitShape<typeof GpuProcessSchema>;

const MIB = 1024n * 1024n;

/**
 * Values nvidia-smi prints where it has no number: "[N/A]" (MIG, vGPU, fields
 * the product lacks), "[Not Supported]" (older drivers and GeForce boards),
 * "[Insufficient Permissions]", "[Unknown Error]", "[GPU is lost]"… and a bare
 * "N/A" for some fields.
 */
export function isUnavailable(field: string): boolean {
  const value = field.trim();
  return value === "" || value === "N/A" || (value.startsWith("[") && value.endsWith("]"));
}

function optionalNumber(field: string, what: string): number | undefined {
  if (isUnavailable(field)) return undefined;
  const value = Number(field.trim());
  if (!/^\d+(\.\d+)?$/.test(field.trim()) || !Number.isFinite(value))
    throw new Error(`${what} is not a number: ${JSON.stringify(field.trim())}`);
  return value;
}

function optionalMebibytes(field: string, what: string): bigint | undefined {
  const value = optionalNumber(field, what);
  return value === undefined ? undefined : BigInt(Math.round(value)) * MIB;
}

function csvLines(text: string): string[] {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
}

/**
 * Parses the answer to GPU_QUERY_ARGS: one line per physical GPU,
 * "index, uuid, name, utilization.gpu %, utilization.memory %, memory.used MiB,
 * memory.total MiB, mig.mode.current". Pure. A GPU name holding a comma is
 * rejoined: the columns around it are counted from either end.
 */
export function parseGpuCsv(text: string): GpuInit[] {
  return csvLines(text).map((line, lineIndex) => {
    const fields = line.split(",").map((field) => field.trim());
    if (fields.length < 8)
      throw new Error(`GPU line ${lineIndex + 1} has ${fields.length} fields, expected 8: ${JSON.stringify(line)}`);
    const where = `GPU line ${lineIndex + 1}`;
    const [indexField, uuid] = fields as [string, string];
    const [utilization, memoryUtilization, memoryUsed, memoryTotal, migMode] = fields.slice(-5) as [
      string,
      string,
      string,
      string,
      string,
    ];
    if (!isCount(indexField)) throw new Error(`${where}: index is not a number: ${JSON.stringify(indexField)}`);
    const gpu: GpuInit = {
      index: Number(indexField),
      uuid,
      name: fields.slice(2, -5).join(", "),
      migMode: isUnavailable(migMode) ? "" : migMode,
    };
    const busy = optionalNumber(utilization, `${where}: utilization.gpu`);
    const memoryBusy = optionalNumber(memoryUtilization, `${where}: utilization.memory`);
    const used = optionalMebibytes(memoryUsed, `${where}: memory.used`);
    const total = optionalMebibytes(memoryTotal, `${where}: memory.total`);
    if (busy !== undefined) gpu.utilizationRatio = busy / 100;
    if (memoryBusy !== undefined) gpu.memoryUtilizationRatio = memoryBusy / 100;
    if (used !== undefined) gpu.memoryUsedBytes = used;
    if (total !== undefined) gpu.memoryTotalBytes = total;
    return gpu;
  });
}

/** A compute process as nvidia-smi names it, before its owner is looked up. */
export interface ComputeApp {
  pid: number;
  gpuUuid: string;
  processName: string;
  usedMemoryBytes?: bigint;
}

/**
 * Parses the answer to COMPUTE_APPS_QUERY_ARGS: "pid, gpu_uuid, process_name,
 * used_memory MiB" per process. Pure. The process name is everything between
 * the uuid and the last column, so a name with commas survives (some drivers
 * print them as they are). Rows nvidia-smi could not read (a bracketed
 * pid such as "[Insufficient Permissions]" inside containers) are skipped.
 */
/** A decimal whole number that a JavaScript number holds exactly (a damaged line can carry 2^64). */
function isCount(field: string): boolean {
  return /^\d+$/.test(field) && Number.isSafeInteger(Number(field));
}

export function parseComputeAppsCsv(text: string): ComputeApp[] {
  const apps: ComputeApp[] = [];
  for (const [lineIndex, line] of csvLines(text).entries()) {
    if (line.startsWith("No running processes found")) continue;
    const fields = line.split(",").map((field) => field.trim());
    if (fields.length < 4)
      throw new Error(`process line ${lineIndex + 1} has ${fields.length} fields, expected 4: ${JSON.stringify(line)}`);
    const [pidField, gpuUuid] = fields as [string, string];
    if (isUnavailable(pidField)) continue;
    if (!isCount(pidField))
      throw new Error(`process line ${lineIndex + 1}: pid is not a number: ${JSON.stringify(pidField)}`);
    const app: ComputeApp = { pid: Number(pidField), gpuUuid, processName: fields.slice(2, -1).join(", ") };
    const used = optionalMebibytes(fields[fields.length - 1]!, `process line ${lineIndex + 1}: used_memory`);
    if (used !== undefined) app.usedMemoryBytes = used;
    apps.push(app);
  }
  return apps;
}

/** What nvidia-smi prints when it runs but finds no GPU to talk to. */
const NO_GPU_MESSAGES = [
  /No devices were found/i,
  /No supported GPUs were found/i,
  // Exit 9: the kernel module is not loaded, as in a VM from a GPU image that was given no GPU.
  /couldn't communicate with the NVIDIA driver/i,
];

export type RunMeaning =
  | { kind: "answered"; stdout: string }
  /** No nvidia-smi: no NVIDIA driver is installed. */
  | { kind: "not-installed"; message: string }
  /** nvidia-smi runs but finds no GPU it can use. */
  | { kind: "no-gpu"; message: string }
  | { kind: "failed"; message: string };

/** What one nvidia-smi run means for the signal. Pure. */
export function interpretRun(result: CommandResult): RunMeaning {
  switch (result.kind) {
    case "not-found":
      return { kind: "not-installed", message: `no nvidia-smi (${result.message})` };
    case "spawn-failed":
      return { kind: "failed", message: `nvidia-smi could not start: ${result.message}` };
    case "timed-out":
      return { kind: "failed", message: `nvidia-smi did not answer within ${result.timeoutMs / 1000}s and was killed` };
    case "output-too-large":
      return { kind: "failed", message: `nvidia-smi wrote more than ${result.maxBytes} bytes and was killed` };
    case "exited": {
      const said = firstLine(`${result.stdout}\n${result.stderr}`);
      if (NO_GPU_MESSAGES.some((pattern) => pattern.test(result.stdout) || pattern.test(result.stderr)))
        return { kind: "no-gpu", message: `nvidia-smi: ${said}` };
      if (result.code === 0) return { kind: "answered", stdout: result.stdout };
      const how = result.code === null ? `was killed by ${result.signal}` : `exited with code ${result.code}`;
      return { kind: "failed", message: `nvidia-smi ${how}${said === "" ? "" : `: ${said}`}` };
    }
  }
}

function firstLine(text: string): string {
  return (
    text
      .split("\n")
      .map((line) => line.trim())
      .find((line) => line !== "") ?? ""
  ).slice(0, 200);
}
