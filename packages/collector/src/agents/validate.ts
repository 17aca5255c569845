// Every field from an agent is checked before anything uses it. Pure.
import { PROTOCOL_VERSION, type Hello, type Report } from "@ws/protocol";

const K8S_NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** An age over ~10 years is garbage, not a long-idle VM. */
const MAX_AGE_SECONDS = 10 * 365 * 86_400;
const MAX_LIST = 4_096;

export class ValidationError extends Error {
  override name = "ValidationError";
}

export function validateHello(hello: Hello): { namespace: string; name: string } {
  const ns = hello.vm?.namespace ?? "";
  const name = hello.vm?.name ?? "";
  if (!K8S_NAME.test(ns) || ns.length > 63) throw new ValidationError(`hello: invalid VM namespace ${JSON.stringify(ns.slice(0, 80))}`);
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
  if (!Number.isFinite(value) || value < 0 || value > max) throw new ValidationError(`report: ${field} = ${value} is out of range`);
}

function checkCount(value: number | undefined, field: string): void {
  if (value === undefined) return;
  if (!Number.isFinite(value) || value < 0) throw new ValidationError(`report: ${field} = ${value} must be a finite non-negative number`);
}

function checkList(list: readonly unknown[], field: string): void {
  if (list.length > MAX_LIST) throw new ValidationError(`report: ${field} has ${list.length} entries (max ${MAX_LIST})`);
}

/** Throws ValidationError on the first bad field; the caller closes that stream only. */
export function validateReport(report: Report): void {
  checkAge(report.sampleAgeSeconds, "sample_age_seconds");
  checkCount(report.intervalSeconds, "interval_seconds");
  checkList(report.sources, "sources");
  for (const server of report.jupyter?.servers ?? []) {
    checkAge(server.lastActivityAgeSeconds, "jupyter.last_activity_age_seconds");
    checkList(server.kernels, "jupyter.kernels");
    for (const kernel of server.kernels) checkAge(kernel.lastActivityAgeSeconds, "jupyter.kernel.last_activity_age_seconds");
    for (const terminal of server.terminals) checkAge(terminal.lastActivityAgeSeconds, "jupyter.terminal.last_activity_age_seconds");
  }
  checkList(report.sessions?.sessions ?? [], "sessions");
  for (const session of report.sessions?.sessions ?? []) {
    checkAge(session.inputAgeSeconds, "sessions.input_age_seconds");
    checkAge(session.outputAgeSeconds, "sessions.output_age_seconds");
    checkAge(session.loginAgeSeconds, "sessions.login_age_seconds");
  }
  for (const instance of report.codeServer?.instances ?? []) checkAge(instance.heartbeatAgeSeconds, "code_server.heartbeat_age_seconds");
  checkList(report.gpu?.gpus ?? [], "gpu.gpus");
  checkAge(report.gpu?.sampleAgeSeconds, "gpu.sample_age_seconds");
  for (const gpu of report.gpu?.gpus ?? []) {
    checkRatio(gpu.utilizationRatio, "gpu.utilization_ratio");
    checkRatio(gpu.memoryUtilizationRatio, "gpu.memory_utilization_ratio");
  }
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
    checkList(system.topProcesses, "system.top_processes");
  }
  checkList(report.leases?.leases ?? [], "leases");
  for (const lease of report.leases?.leases ?? []) {
    checkAge(lease.ageSeconds, "lease.age_seconds");
    if (!Number.isFinite(lease.requestedSeconds) || lease.requestedSeconds <= 0 || lease.requestedSeconds > 366 * 86_400) {
      throw new ValidationError(`report: lease ${lease.id.slice(0, 40)} requested_seconds = ${lease.requestedSeconds} is not a valid duration`);
    }
  }
  checkList(report.desktop?.devices ?? [], "desktop.devices");
  for (const device of report.desktop?.devices ?? []) checkAge(device.inputAgeSeconds, "desktop.input_age_seconds");
  checkList(report.remoteSessions?.sessions ?? [], "remote_sessions");
  for (const session of report.remoteSessions?.sessions ?? []) {
    checkAge(session.loginAgeSeconds, "remote_sessions.login_age_seconds");
    checkAge(session.interactionAgeSeconds, "remote_sessions.interaction_age_seconds");
  }
  checkList(report.disk?.mounts ?? [], "disk.mounts");
  checkList(report.inhibitors?.locks ?? [], "inhibitors.locks");
}
