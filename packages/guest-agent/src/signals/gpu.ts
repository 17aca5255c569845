/**
 * GPU: per-GPU utilization and memory, and the compute processes on them, from
 * nvidia-smi. nvidia-smi takes from tens of milliseconds to many seconds (driver
 * initialisation without persistence mode, a wedged GPU), so it runs on its own
 * cadence, one run at a time, with a hard timeout; Reports in between get the
 * cached answer and its age. No nvidia-smi, or no GPU behind it, is "absent".
 */
import { spawn } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { GpuProcessSchema, GpuSchema, GpuSignalSchema } from "@ws/protocol";
import { under, type Roots } from "../roots.js";
import type { Users } from "../users.js";
import { parseStatusUid } from "./proc-pid.js";
import { absent, errorMessage, failed, ok, type Signal, type SignalContext, type SignalOutcome } from "./types.js";

export type GpuSignalValue = MessageInitShape<typeof GpuSignalSchema>;
export type GpuInit = MessageInitShape<typeof GpuSchema>;
export type GpuProcessInit = MessageInitShape<typeof GpuProcessSchema>;

export interface GpuSignalOptions {
  /** The nvidia-smi executable: a name looked up in PATH, or a path. */
  command: string;
  /** How often nvidia-smi runs at most; Reports in between get the cached answer. */
  intervalMs: number;
  /** Each nvidia-smi run is killed (SIGKILL) after this long. */
  timeoutMs: number;
}

export const DEFAULT_GPU_OPTIONS: GpuSignalOptions = { command: "nvidia-smi", intervalMs: 15_000, timeoutMs: 10_000 };

export const GPU_QUERY_ARGS = [
  "--query-gpu=index,uuid,name,utilization.gpu,utilization.memory,memory.used,memory.total,mig.mode.current",
  "--format=csv,noheader,nounits",
];
export const COMPUTE_APPS_QUERY_ARGS = [
  "--query-compute-apps=pid,gpu_uuid,process_name,used_memory",
  "--format=csv,noheader,nounits",
];

const MIB = 1024n * 1024n;
/** nvidia-smi's answer for a GPU list is a few hundred bytes per GPU; anything near this is not it. */
const MAX_OUTPUT_BYTES = 1024 * 1024;

// --- parsing (pure) -------------------------------------------------------------

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
    if (!/^\d+$/.test(indexField)) throw new Error(`${where}: index is not a number: ${JSON.stringify(indexField)}`);
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
export function parseComputeAppsCsv(text: string): ComputeApp[] {
  const apps: ComputeApp[] = [];
  for (const [lineIndex, line] of csvLines(text).entries()) {
    if (line.startsWith("No running processes found")) continue;
    const fields = line.split(",").map((field) => field.trim());
    if (fields.length < 4)
      throw new Error(`process line ${lineIndex + 1} has ${fields.length} fields, expected 4: ${JSON.stringify(line)}`);
    const [pidField, gpuUuid] = fields as [string, string];
    if (isUnavailable(pidField)) continue;
    if (!/^\d+$/.test(pidField))
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

export type CommandResult =
  | { kind: "exited"; code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }
  | { kind: "not-found"; message: string }
  | { kind: "spawn-failed"; message: string }
  | { kind: "timed-out"; timeoutMs: number }
  | { kind: "output-too-large"; maxBytes: number };

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

/** PCI vendor id of NVIDIA, and the PCI class of display controllers (VGA 0x0300, 3D 0x0302). */
const NVIDIA_VENDOR = "0x10de";
const DISPLAY_CLASS_PREFIX = "0x03";

/** The PCI addresses of NVIDIA display controllers, from <sys>/bus/pci/devices/*\/{vendor,class}. */
export async function nvidiaPciDevices(roots: Roots): Promise<string[]> {
  const devicesDir = under(roots.sys, "bus", "pci", "devices");
  let addresses: string[];
  try {
    addresses = await readdir(devicesDir);
  } catch {
    return [];
  }
  const found = await Promise.all(
    addresses.map(async (address) => {
      try {
        const [vendor, pciClass] = await Promise.all(
          ["vendor", "class"].map((file) => readFile(path.join(devicesDir, address, file), "utf8")),
        );
        return vendor?.trim() === NVIDIA_VENDOR && pciClass?.trim().startsWith(DISPLAY_CLASS_PREFIX)
          ? address
          : undefined;
      } catch {
        return undefined;
      }
    }),
  );
  return found.filter((address): address is string => address !== undefined);
}

function firstLine(text: string): string {
  return (
    text
      .split("\n")
      .map((line) => line.trim())
      .find((line) => line !== "") ?? ""
  ).slice(0, 200);
}

// --- running nvidia-smi (I/O) ------------------------------------------------------

interface RunningCommand {
  /** Settles at exit, or at the timeout even if the process has not died yet. */
  result: Promise<CommandResult>;
  /** Settles once the process is really gone (a process stuck in the driver may outlive SIGKILL for a while). */
  gone: Promise<void>;
}

/** Runs an executable without a shell, killing it with SIGKILL after timeoutMs. */
export function runCommand(
  file: string,
  args: string[],
  timeoutMs: number,
  maxBytes = MAX_OUTPUT_BYTES,
): RunningCommand {
  let settle!: (result: CommandResult) => void;
  let markGone!: () => void;
  const result = new Promise<CommandResult>((resolve) => (settle = resolve));
  const gone = new Promise<void>((resolve) => (markGone = resolve));
  let settled = false;
  const finish = (outcome: CommandResult): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    settle(outcome);
  };

  const child = spawn(file, args, { stdio: ["ignore", "pipe", "pipe"] });
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  let bytes = 0;
  const collect = (chunks: Buffer[]) => (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > maxBytes) {
      child.kill("SIGKILL");
      finish({ kind: "output-too-large", maxBytes });
      return;
    }
    chunks.push(chunk);
  };
  child.stdout.on("data", collect(stdout));
  child.stderr.on("data", collect(stderr));
  const timer = setTimeout(() => {
    child.kill("SIGKILL");
    finish({ kind: "timed-out", timeoutMs });
  }, timeoutMs);

  child.on("error", (error: NodeJS.ErrnoException) => {
    finish(
      error.code === "ENOENT"
        ? { kind: "not-found", message: errorMessage(error) }
        : { kind: "spawn-failed", message: errorMessage(error) },
    );
    if (child.pid === undefined) markGone();
  });
  child.on("close", (code, signal) => {
    finish({
      kind: "exited",
      code,
      signal,
      stdout: Buffer.concat(stdout).toString("utf8"),
      stderr: Buffer.concat(stderr).toString("utf8"),
    });
    markGone();
  });
  return { result, gone };
}

/** The uid that owns a process, or undefined when it has gone or cannot be read. */
async function processOwner(roots: Roots, pid: number): Promise<number | undefined> {
  try {
    return parseStatusUid(await readFile(under(roots.proc, String(pid), "status"), "utf8"));
  } catch {
    return undefined;
  }
}

/** An nvidia-smi answer as cached; its age is added when a Report asks. */
type GpuAnswer = SignalOutcome<{ gpus: GpuInit[]; processes: GpuProcessInit[] }>;

/** One refresh: the GPU query, then (with GPUs) the process query, one after the other. */
async function queryNvidiaSmi(
  options: GpuSignalOptions,
  roots: Roots,
  users: Users,
  onChild: (gone: Promise<void>) => void,
): Promise<GpuAnswer> {
  const run = async (args: string[]) => {
    const running = runCommand(options.command, args, options.timeoutMs);
    onChild(running.gone);
    return interpretRun(await running.result);
  };
  const gpuRun = await run(GPU_QUERY_ARGS);
  if (gpuRun.kind === "not-installed") return absent(gpuRun.message);
  if (gpuRun.kind === "failed") return failed(gpuRun.message);
  if (gpuRun.kind === "no-gpu") {
    // A VM from a GPU image that was given no GPU looks like this; so does a GPU the driver cannot use, which is a fault.
    const devices = await nvidiaPciDevices(roots);
    if (devices.length === 0) return absent(`${gpuRun.message} (no NVIDIA GPU on the PCI bus)`);
    return failed(`${gpuRun.message}, yet an NVIDIA GPU is on the PCI bus at ${devices.join(", ")}`);
  }
  let gpus: GpuInit[];
  try {
    gpus = parseGpuCsv(gpuRun.stdout);
  } catch (error) {
    return failed(`nvidia-smi --query-gpu: ${errorMessage(error)}`);
  }
  if (gpus.length === 0) return absent("nvidia-smi lists no GPU");

  const appsRun = await run(COMPUTE_APPS_QUERY_ARGS);
  if (appsRun.kind !== "answered")
    return { state: "failed", message: `GPU processes unknown: ${appsRun.message}`, value: { gpus, processes: [] } };
  let apps: ComputeApp[];
  try {
    apps = parseComputeAppsCsv(appsRun.stdout);
  } catch (error) {
    return {
      state: "failed",
      message: `nvidia-smi --query-compute-apps: ${errorMessage(error)}`,
      value: { gpus, processes: [] },
    };
  }
  const processes = await Promise.all(
    apps.map(async (app): Promise<GpuProcessInit> => {
      const uid = await processOwner(roots, app.pid);
      return uid === undefined
        ? { ...app, uid: 0, user: "" }
        : { ...app, uid, user: users.byUid(uid)?.name ?? String(uid) };
    }),
  );
  return ok({ gpus, processes });
}

/** Resolves when the signal aborts; the returned cleanup removes the listener. */
function whenAborted(signal: AbortSignal): { aborted: Promise<void>; cleanup: () => void } {
  let onAbort = (): void => {};
  const aborted = new Promise<void>((resolve) => {
    onAbort = () => resolve();
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  return { aborted, cleanup: () => signal.removeEventListener("abort", onAbort) };
}

export function createGpuSignal(options: GpuSignalOptions = DEFAULT_GPU_OPTIONS): Signal<GpuSignalValue> {
  if (!(options.intervalMs > 0) || !(options.timeoutMs > 0))
    throw new Error(`GPU intervalMs and timeoutMs must be positive (got ${options.intervalMs}, ${options.timeoutMs})`);
  let cached: { atMs: number; answer: GpuAnswer } | undefined;
  /** Settles when the refresh in progress has an answer. */
  let answering: Promise<void> | undefined;
  /** Set from the start of a refresh until its last nvidia-smi process is gone: no second run meanwhile. */
  let busy = false;

  const refresh = (ctx: SignalContext): void => {
    busy = true;
    const children: Array<Promise<void>> = [];
    answering = queryNvidiaSmi(options, ctx.roots, ctx.users, (gone) => children.push(gone))
      .catch((error: unknown): GpuAnswer => failed(`nvidia-smi: ${errorMessage(error)}`))
      .then((answer) => {
        cached = { atMs: ctx.clock.monotonicMs(), answer };
      })
      .finally(() => {
        answering = undefined;
        void Promise.all(children).then(() => (busy = false));
      });
  };

  return {
    name: "gpu",
    async collect(ctx: SignalContext): Promise<SignalOutcome<GpuSignalValue>> {
      const due = cached === undefined || ctx.clock.monotonicMs() - cached.atMs >= options.intervalMs;
      if (due && !busy) refresh(ctx);
      if (answering !== undefined) {
        const abort = whenAborted(ctx.signal);
        await Promise.race([answering, abort.aborted]);
        abort.cleanup();
      }
      if (cached === undefined) return failed("nvidia-smi has not answered yet");
      const sampleAgeSeconds = Math.max(0, (ctx.clock.monotonicMs() - cached.atMs) / 1000);
      const { answer } = cached;
      if (answer.state === "ok") return ok({ ...answer.value, sampleAgeSeconds }, answer.message);
      if (answer.state === "failed" && answer.value !== undefined)
        return { state: "failed", message: answer.message, value: { ...answer.value, sampleAgeSeconds } };
      return answer.state === "absent" ? absent(answer.message) : failed(answer.message);
    },
  };
}
