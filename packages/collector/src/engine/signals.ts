// One descriptor per signal: everything the collector knows about a signal, in one place, and
// every other place that needs to know (the idle clock, unattended-max, the vetoes, the
// workstation_signal_active families, /metrics and whatif's readings, docs/policy.md's
// strength table) reads it from here.
//
// strength: strong moves the idle clock to when it happened; weak ("connected") moves it
// only up to weak-activity-max after the last strong evidence.
// kind:
//   human       a person did something (a keystroke, a click, an execution request):
//               resets unattended-max and is what "the user came back" means after a stop;
//   background  work running on its own (CPU, GPU, network, disk, a busy kernel): holds the
//               VM only up to unattended-max after the last human evidence;
//   output      something was written to a terminal: counts only with tty-output-counts and
//               never cancels a pending stop (the notice itself is output);
//   connected   a client is attached (a browser tab, an SSH connection): weak.

import type { Strength, Thresholds } from "./types.js";

export type EvidenceKind = "human" | "background" | "output" | "connected";

/** The signal families of workstation_signal_active (every one is exported, 0 or 1). */
export const SIGNAL_FAMILIES = [
  "tty",
  "jupyter",
  "code-server",
  "desktop",
  "remote-session",
  "gpu",
  "background",
  "lease",
  "inhibitor",
] as const;

export type SignalFamily = (typeof SIGNAL_FAMILIES)[number];

/** The thresholds that are levels (the rest are switches). */
export type LevelThreshold = Exclude<keyof Thresholds, "ttyOutputCounts">;

/** One descriptor per signal: everything the collector needs to know about it. */
export interface SignalDescriptor {
  strength: Strength;
  kind: EvidenceKind;
  /** Its family in workstation_signal_active. */
  family: SignalFamily;
  /** What moves it, in words (docs/policy.md's table says the same). */
  movedBy: string;
  /** The Report source (REPORT_SOURCES) whose evidence function (engine/evidence.ts) reads it. */
  source: "sessions" | "desktop" | "remote_sessions" | "jupyter" | "code_server" | "gpu" | "system";
  /**
   * What /metrics keeps of it for whatif (model/readings.ts): "activity-time", the youngest
   * activity's time (workstation_signal_last_activity_timestamp_seconds{signal}); "level", the
   * level the evidence compares with its threshold (the level's own gauge).
   */
  recorded: "activity-time" | "level";
  /** The threshold knob a level must reach to count (background work read as a level). */
  threshold?: LevelThreshold;
  /** While it lasts it also forbids a stop (a veto of its own name), up to unattended-max when background. */
  veto?: true;
  /**
   * What the host sees of the use this signal reads (loop/hostside/disagree.ts): "vcpu", a busy vCPU;
   * "connection", a VNC/console/port-forward connection. A host reading of that kind while none
   * of its signals is active is an agent/host disagreement.
   */
  hostSees?: "vcpu" | "connection";
}

/** Families of the vetoes that are not readings (a blind source has none: it is not activity). */
const VETO_FAMILIES = { lease: "lease", inhibitor: "inhibitor" } as const satisfies Record<string, SignalFamily>;

/** The vetoes that are not a signal's. */
export const OTHER_VETOES = ["lease", "inhibitor", "blind-source"] as const;

export const SIGNALS = Object.freeze({
  "tty-input": {
    hostSees: "connection",
    family: "tty",
    strength: "strong",
    kind: "human",
    source: "sessions",
    recorded: "activity-time",
    movedBy: "a keystroke on a terminal (ssh, console, tmux, IDE or Jupyter terminal pty)",
  },
  "tty-output": {
    hostSees: "connection",
    family: "tty",
    strength: "strong",
    kind: "output",
    source: "sessions",
    recorded: "activity-time",
    movedBy: "output written to a terminal (only with tty-output-counts)",
  },
  "desktop-input": {
    hostSees: "connection",
    family: "desktop",
    strength: "strong",
    kind: "human",
    source: "desktop",
    recorded: "activity-time",
    movedBy: "keyboard, mouse or tablet input in the guest (VNC, SPICE), not while the screen is locked",
  },
  "remote-session": {
    hostSees: "connection",
    family: "remote-session",
    strength: "strong",
    kind: "human",
    source: "remote_sessions",
    recorded: "activity-time",
    movedBy:
      "a person's traffic in an SSH session without a terminal (VS Code Remote-SSH, Gateway, sftp): irregular bursts, not a regular cadence and not a forward to Jupyter or code-server; or its opening",
  },
  "remote-connected": {
    hostSees: "connection",
    family: "remote-session",
    strength: "weak",
    kind: "connected",
    source: "remote_sessions",
    recorded: "activity-time",
    movedBy:
      "an SSH session without a terminal is open, including its machine traffic: a regular cadence (a page reloading itself, a poller) or a forward to a service whose own signals decide",
  },
  "jupyter-kernel": {
    family: "jupyter",
    strength: "strong",
    kind: "human",
    source: "jupyter",
    recorded: "activity-time",
    movedBy: "a kernel's last message while it is not busy (execution requests and their replies)",
  },
  "jupyter-terminal": {
    hostSees: "connection",
    family: "jupyter",
    strength: "strong",
    kind: "output",
    source: "jupyter",
    recorded: "activity-time",
    movedBy:
      "a Jupyter terminal's last_activity, which its output moves too (only with tty-output-counts; its input counts as tty-input on its pty)",
  },
  "jupyter-server": {
    family: "jupyter",
    strength: "weak",
    kind: "connected",
    source: "jupyter",
    recorded: "activity-time",
    movedBy: "the server's /api/status last_activity: API traffic, kernel messages and terminal output all move it",
  },
  // code-server writes its heartbeat while a browser tab is open, used or not: the agent cannot
  // tell interaction from a connected tab with it, so it is not human evidence.
  "code-server": {
    hostSees: "connection",
    family: "code-server",
    strength: "weak",
    kind: "connected",
    source: "code_server",
    recorded: "activity-time",
    movedBy: "code-server's heartbeat: a browser tab is open",
  },
  "jupyter-busy": {
    hostSees: "vcpu",
    family: "jupyter",
    strength: "strong",
    kind: "background",
    source: "jupyter",
    recorded: "level",
    veto: true,
    movedBy: "a kernel executing (busy)",
  },
  "jupyter-connected": {
    hostSees: "connection",
    family: "jupyter",
    strength: "weak",
    kind: "connected",
    source: "jupyter",
    recorded: "level",
    movedBy: "a browser connected to a kernel",
  },
  gpu: {
    hostSees: "vcpu",
    family: "gpu",
    strength: "strong",
    kind: "background",
    source: "gpu",
    recorded: "level",
    threshold: "gpuUtilizationRatio",
    veto: true,
    movedBy: "GPU utilization at or above gpu-utilization-threshold, or an unreadable GPU held by a process",
  },
  cpu: {
    hostSees: "vcpu",
    family: "background",
    strength: "strong",
    kind: "background",
    source: "system",
    recorded: "level",
    threshold: "cpuBusyRatio",
    veto: true,
    movedBy: "whole-machine CPU above cpu-busy-threshold",
  },
  "user-cpu": {
    hostSees: "vcpu",
    family: "background",
    strength: "strong",
    kind: "background",
    source: "system",
    recorded: "level",
    threshold: "userProcessCpuCores",
    veto: true,
    movedBy: "users' processes above user-cpu-threshold",
  },
  network: {
    family: "background",
    strength: "strong",
    kind: "background",
    source: "system",
    recorded: "level",
    threshold: "networkBytesPerSecond",
    veto: true,
    movedBy: "network traffic above network-threshold",
  },
  disk: {
    family: "background",
    strength: "strong",
    kind: "background",
    source: "system",
    recorded: "level",
    threshold: "diskBytesPerSecond",
    veto: true,
    movedBy: "disk I/O above disk-threshold",
  },
} as const satisfies Record<string, SignalDescriptor>);

/** Every signal the collector knows: the keys of SIGNALS. */
export type SignalName = keyof typeof SIGNALS;

/** The signals that forbid a stop while they last (their descriptor says `veto`). */
export type SignalVeto = { [K in SignalName]: (typeof SIGNALS)[K] extends { veto: true } ? K : never }[SignalName];

/** The signals /metrics keeps as the time of their youngest activity. */
export type ActivitySignal = {
  [K in SignalName]: (typeof SIGNALS)[K]["recorded"] extends "activity-time" ? K : never;
}[SignalName];

/** The Report sources an evidence function reads. */
export type EvidenceSource = SignalDescriptor["source"];

export const SIGNAL_NAMES = Object.keys(SIGNALS) as SignalName[];

export const ACTIVITY_SIGNALS = SIGNAL_NAMES.filter(
  (name): name is ActivitySignal => SIGNALS[name].recorded === "activity-time",
);

/** The threshold a signal's level must reach: the policy knob its descriptor names (Infinity: none). */
export function thresholdOf(signal: SignalName, thresholds: Thresholds): number {
  const descriptor: SignalDescriptor = SIGNALS[signal];
  return descriptor.threshold === undefined ? Infinity : thresholds[descriptor.threshold];
}

export function isHumanSignal(signal: SignalName): boolean {
  return SIGNALS[signal].kind === "human";
}

export function isBackgroundSignal(signal: SignalName): boolean {
  return SIGNALS[signal].kind === "background";
}

export function isOutputSignal(signal: SignalName): boolean {
  return SIGNALS[signal].kind === "output";
}

export function isSignalName(name: string): name is SignalName {
  return Object.hasOwn(SIGNALS, name);
}

/** Vetoes that are background work (their signal's descriptor says so): bounded by unattended-max. Leases, inhibitors and blind sources are not. */
export function isBackgroundVeto(kind: string): boolean {
  return isSignalName(kind) && isBackgroundSignal(kind);
}

/** The workstation_signal_active family of a reading's signal or a veto's kind. */
export function familyOf(name: string): SignalFamily | undefined {
  if (isSignalName(name)) return SIGNALS[name].family;
  return Object.hasOwn(VETO_FAMILIES, name) ? VETO_FAMILIES[name as keyof typeof VETO_FAMILIES] : undefined;
}

/**
 * Whether a reading shows that a person came back: after a stop, only human evidence would
 * have started the VM again (background work of a recorded VM that was never stopped does not).
 */
export function showsPersonAfter(reading: { signal: SignalName; atMs: number }, afterMs: number): boolean {
  return isHumanSignal(reading.signal) && reading.atMs > afterMs;
}
