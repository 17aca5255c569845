// Every field from an agent is checked before anything uses it. Pure.
import { PROTOCOL_VERSION, type Hello, type Report } from "@ws/protocol";

const K8S_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** An age over ~10 years is garbage, not a long-idle VM. */
const MAX_AGE_SECONDS = 10 * 365 * 86_400;

export class ValidationError extends Error {
  override name = "ValidationError";
}

export function validateHello(hello: Hello): { namespace: string; name: string } {
  const ns = hello.vm?.namespace ?? "";
  const name = hello.vm?.name ?? "";
  if (!K8S_NAME.test(ns) || ns.length > 63)
    throw new ValidationError(`hello: invalid VM namespace ${JSON.stringify(ns.slice(0, 80))}`);
  if (!K8S_NAME.test(name)) throw new ValidationError(`hello: invalid VM name ${JSON.stringify(name.slice(0, 80))}`);
  if (hello.token === "") throw new ValidationError("hello: no token");
  // 0 is "unset" (an agent that predates the field); anything else must be a version spoken here.
  if (hello.protocolVersion !== 0 && hello.protocolVersion !== PROTOCOL_VERSION) {
    throw new ValidationError(
      `hello: protocol_version ${hello.protocolVersion} is unknown to this collector, which speaks version ${PROTOCOL_VERSION}: install a ws-agent and ws-collector of matching releases`,
    );
  }
  if (hello.agentVersion.length > 64) throw new ValidationError("hello: agent_version too long");
  if (hello.bootId.length > 64) throw new ValidationError("hello: boot_id too long");
  if (hello.hostname.length > 253) throw new ValidationError("hello: hostname too long");
  if (hello.capabilities.length > 64) throw new ValidationError("hello: too many capabilities");
  return { namespace: ns, name };
}

function checkAge(value: number | undefined, field: string): void {
  if (value === undefined) return;
  if (!Number.isFinite(value) || value < 0 || value > MAX_AGE_SECONDS) {
    throw new ValidationError(`report: ${field} = ${value} is not a valid age in seconds`);
  }
}

function checkRatio(value: number | undefined, field: string, max = 1.5): void {
  if (value === undefined) return;
  if (!Number.isFinite(value) || value < 0 || value > max)
    throw new ValidationError(`report: ${field} = ${value} is out of range`);
}

function checkCount(value: number | undefined, field: string): void {
  if (value === undefined) return;
  if (!Number.isFinite(value) || value < 0)
    throw new ValidationError(`report: ${field} = ${value} must be a finite non-negative number`);
}

/**
 * What one Report may carry (docs/collector-limits.md). Longer lists are cut to these lengths
 * (the first entries are kept, in the agent's order), longer strings to MAX_STRING characters;
 * each cut is counted (workstation_report_truncations_total{field}) and named in the VM's
 * explanation. An agent is trusted with its own VM's activity, never with unbounded memory.
 */
export const REPORT_LIMITS = {
  sources: 64,
  "jupyter.servers": 16,
  /** Over all servers of the Report. */
  "jupyter.kernels": 256,
  "jupyter.terminals": 256,
  sessions: 256,
  "code_server.instances": 32,
  "gpu.gpus": 16,
  "gpu.processes": 256,
  "system.top_processes": 32,
  "disk.mounts": 32,
  "inhibitors.locks": 64,
  leases: 64,
  "desktop.devices": 32,
  remote_sessions: 256,
  "remote_sessions.sshd_listening_ports": 16,
  /** Over all sessions of the Report (the agent sends at most 8 a session). */
  "remote_sessions.forwards": 256,
  /** An hour of minutes: the agent's longest deadline (report-gate.ts). */
  quiet_minutes: 60,
} as const;
export type LimitedField = keyof typeof REPORT_LIMITS | "strings";
/** Characters kept of any string an agent sends (ids, names, users, paths, messages). */
export const MAX_STRING = 256;

/** One cut validation made: the field, how many entries (or strings) the agent sent, how many were kept. */
export interface Truncation {
  field: LimitedField;
  sent: number;
  kept: number;
}

export function describeTruncation(t: Truncation): string {
  return t.field === "strings"
    ? `${t.sent} string(s) cut to ${MAX_STRING} characters`
    : `${t.field} ${t.sent} → ${t.kept}`;
}

class Limiter {
  readonly truncations: Truncation[] = [];
  private cutStrings = 0;

  /** Cuts `list` in place to what is left of `field`'s budget. */
  list<T>(list: T[], field: keyof typeof REPORT_LIMITS, used = 0): T[] {
    const room = Math.max(0, REPORT_LIMITS[field] - used);
    if (list.length > room) {
      this.truncations.push({ field, sent: list.length + used, kept: room + used });
      list.length = room;
    }
    return list;
  }

  /** The object's string fields cut to MAX_STRING. */
  strings<T extends object>(object: T, fields: ReadonlyArray<keyof T>): void {
    for (const field of fields) {
      const value = object[field];
      if (typeof value === "string" && value.length > MAX_STRING) {
        (object as Record<keyof T, unknown>)[field] = value.slice(0, MAX_STRING);
        this.cutStrings++;
      }
    }
  }

  finish(): Truncation[] {
    if (this.cutStrings > 0) this.truncations.push({ field: "strings", sent: this.cutStrings, kept: this.cutStrings });
    return this.truncations;
  }
}

/**
 * Throws ValidationError on the first bad value (the caller closes that stream only); cuts lists
 * and strings over the limits in place and returns what it cut.
 */
export function validateReport(report: Report): Truncation[] {
  const limit = new Limiter();
  checkAge(report.sampleAgeSeconds, "sample_age_seconds");
  checkCount(report.intervalSeconds, "interval_seconds");
  for (const status of limit.list(report.sources, "sources")) limit.strings(status, ["source", "message"]);
  let kernels = 0;
  let terminals = 0;
  for (const server of limit.list(report.jupyter?.servers ?? [], "jupyter.servers")) {
    limit.strings(server, ["url", "runtimeFile", "user", "error", "version"]);
    checkAge(server.lastActivityAgeSeconds, "jupyter.last_activity_age_seconds");
    limit.list(server.kernels, "jupyter.kernels", kernels);
    kernels += server.kernels.length;
    for (const kernel of server.kernels) {
      limit.strings(kernel, ["id", "name", "executionState"]);
      checkAge(kernel.lastActivityAgeSeconds, "jupyter.kernel.last_activity_age_seconds");
    }
    limit.list(server.terminals, "jupyter.terminals", terminals);
    terminals += server.terminals.length;
    for (const terminal of server.terminals) {
      limit.strings(terminal, ["name"]);
      checkAge(terminal.lastActivityAgeSeconds, "jupyter.terminal.last_activity_age_seconds");
    }
  }
  for (const session of limit.list(report.sessions?.sessions ?? [], "sessions")) {
    limit.strings(session, ["user", "tty", "remoteHost"]);
    checkAge(session.inputAgeSeconds, "sessions.input_age_seconds");
    checkAge(session.outputAgeSeconds, "sessions.output_age_seconds");
    checkAge(session.loginAgeSeconds, "sessions.login_age_seconds");
  }
  for (const instance of limit.list(report.codeServer?.instances ?? [], "code_server.instances")) {
    limit.strings(instance, ["user", "heartbeatFile"]);
    checkAge(instance.heartbeatAgeSeconds, "code_server.heartbeat_age_seconds");
  }
  checkAge(report.gpu?.sampleAgeSeconds, "gpu.sample_age_seconds");
  for (const gpu of limit.list(report.gpu?.gpus ?? [], "gpu.gpus")) {
    limit.strings(gpu, ["uuid", "name", "migMode"]);
    checkRatio(gpu.utilizationRatio, "gpu.utilization_ratio");
    checkRatio(gpu.memoryUtilizationRatio, "gpu.memory_utilization_ratio");
  }
  for (const process of limit.list(report.gpu?.processes ?? [], "gpu.processes"))
    limit.strings(process, ["gpuUuid", "processName", "user"]);
  const system = report.system;
  if (system) {
    checkRatio(system.cpuBusyRatio, "system.cpu_busy_ratio");
    for (const [field, value] of Object.entries({
      load1: system.load1,
      network_receive_bytes_per_second: system.networkReceiveBytesPerSecond,
      network_transmit_bytes_per_second: system.networkTransmitBytesPerSecond,
      disk_read_bytes_per_second: system.diskReadBytesPerSecond,
      disk_write_bytes_per_second: system.diskWriteBytesPerSecond,
      user_process_cpu_cores: system.userProcessCpuCores,
    })) {
      checkCount(value, `system.${field}`);
    }
    for (const process of limit.list(system.topProcesses, "system.top_processes"))
      limit.strings(process, ["user", "command"]);
  }
  for (const lease of limit.list(report.leases?.leases ?? [], "leases")) {
    limit.strings(lease, ["id", "user", "reason"]);
    checkAge(lease.ageSeconds, "lease.age_seconds");
    if (
      !Number.isFinite(lease.requestedSeconds) ||
      lease.requestedSeconds <= 0 ||
      lease.requestedSeconds > 366 * 86_400
    ) {
      throw new ValidationError(
        `report: lease ${lease.id.slice(0, 40)} requested_seconds = ${lease.requestedSeconds} is not a valid duration`,
      );
    }
  }
  for (const device of limit.list(report.desktop?.devices ?? [], "desktop.devices")) {
    limit.strings(device, ["node", "name"]);
    checkAge(device.inputAgeSeconds, "desktop.input_age_seconds");
  }
  let forwards = 0;
  for (const session of limit.list(report.remoteSessions?.sessions ?? [], "remote_sessions")) {
    limit.strings(session, ["user", "remoteHost", "command"]);
    checkAge(session.loginAgeSeconds, "remote_sessions.login_age_seconds");
    checkAge(session.interactionAgeSeconds, "remote_sessions.interaction_age_seconds");
    const cadence = session.cadence;
    if (cadence) {
      checkAge(cadence.periodSeconds, "remote_sessions.cadence.period_seconds");
      checkCount(cadence.meanBurstBytes, "remote_sessions.cadence.mean_burst_bytes");
      checkAge(cadence.lastBurstAgeSeconds, "remote_sessions.cadence.last_burst_age_seconds");
    }
    limit.list(session.forwards, "remote_sessions.forwards", forwards);
    forwards += session.forwards.length;
    for (const forward of session.forwards) {
      limit.strings(forward, ["destinationAddress", "service"]);
      checkAge(forward.lastSeenAgeSeconds, "remote_sessions.forwards.last_seen_age_seconds");
    }
  }
  if (report.remoteSessions) {
    limit.list(report.remoteSessions.sshdListeningPorts, "remote_sessions.sshd_listening_ports");
    if (report.remoteSessions.sshdListeningPorts.some((port) => port < 1 || port > 65535))
      throw new ValidationError("remote_sessions.sshd_listening_ports: a port is outside 1–65535");
  }
  for (const mount of limit.list(report.disk?.mounts ?? [], "disk.mounts"))
    limit.strings(mount, ["mountPoint", "device", "fsType"]);
  for (const lock of limit.list(report.inhibitors?.locks ?? [], "inhibitors.locks"))
    limit.strings(lock, ["who", "why", "what", "mode"]);
  for (const minute of limit.list(report.quietMinutes, "quiet_minutes"))
    checkAge(minute.idleSeconds, "quiet_minutes.idle_seconds");
  return limit.finish();
}
