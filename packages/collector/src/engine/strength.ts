// What each reading is worth: the strength table of docs/policy.md, as code.
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

import type { SignalName, Strength, VetoKind } from "./types.js";

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

/** One row per signal: everything the collector needs to know about what a reading is worth. */
export interface SignalMeaning {
  strength: Strength;
  kind: EvidenceKind;
  /** Its family in workstation_signal_active. */
  family: SignalFamily;
  /** What moves it, in words (docs/policy.md's table is generated from the same words). */
  movedBy: string;
}

/** Families of the vetoes that are not readings (a blind source has none: it is not activity). */
const VETO_FAMILIES: Readonly<Partial<Record<VetoKind, SignalFamily>>> = { lease: "lease", inhibitor: "inhibitor" };

export const SIGNAL_TABLE: Readonly<Record<SignalName, SignalMeaning>> = Object.freeze({
  "tty-input": {
    family: "tty",
    strength: "strong",
    kind: "human",
    movedBy: "a keystroke on a terminal (ssh, console, tmux, IDE or Jupyter terminal pty)",
  },
  "desktop-input": {
    family: "desktop",
    strength: "strong",
    kind: "human",
    movedBy: "keyboard, mouse or tablet input in the guest (VNC, SPICE), not while the screen is locked",
  },
  "remote-session": {
    family: "remote-session",
    strength: "strong",
    kind: "human",
    movedBy:
      "a person's traffic in an SSH session without a terminal (VS Code Remote-SSH, Gateway, sftp): irregular bursts, not a regular cadence and not a forward to Jupyter or code-server; or its opening",
  },
  "jupyter-kernel": {
    family: "jupyter",
    strength: "strong",
    kind: "human",
    movedBy: "a kernel's last message while it is not busy (execution requests and their replies)",
  },
  "tty-output": {
    family: "tty",
    strength: "strong",
    kind: "output",
    movedBy: "output written to a terminal (only with tty-output-counts)",
  },
  "jupyter-terminal": {
    family: "jupyter",
    strength: "strong",
    kind: "output",
    movedBy:
      "a Jupyter terminal's last_activity, which its output moves too (only with tty-output-counts; its input counts as tty-input on its pty)",
  },
  "jupyter-busy": { family: "jupyter", strength: "strong", kind: "background", movedBy: "a kernel executing (busy)" },
  gpu: {
    family: "gpu",
    strength: "strong",
    kind: "background",
    movedBy: "GPU utilization at or above gpu-utilization-threshold, or an unreadable GPU held by a process",
  },
  cpu: {
    family: "background",
    strength: "strong",
    kind: "background",
    movedBy: "whole-machine CPU above cpu-busy-threshold",
  },
  "user-cpu": {
    family: "background",
    strength: "strong",
    kind: "background",
    movedBy: "users' processes above user-cpu-threshold",
  },
  network: {
    family: "background",
    strength: "strong",
    kind: "background",
    movedBy: "network traffic above network-threshold",
  },
  disk: { family: "background", strength: "strong", kind: "background", movedBy: "disk I/O above disk-threshold" },
  "jupyter-connected": {
    family: "jupyter",
    strength: "weak",
    kind: "connected",
    movedBy: "a browser connected to a kernel",
  },
  "jupyter-server": {
    family: "jupyter",
    strength: "weak",
    kind: "connected",
    movedBy: "the server's /api/status last_activity: API traffic, kernel messages and terminal output all move it",
  },
  // code-server writes its heartbeat while a browser tab is open, used or not: the agent cannot
  // tell interaction from a connected tab with it, so it is not human evidence.
  "code-server": {
    family: "code-server",
    strength: "weak",
    kind: "connected",
    movedBy: "code-server's heartbeat: a browser tab is open",
  },
  "remote-connected": {
    family: "remote-session",
    strength: "weak",
    kind: "connected",
    movedBy:
      "an SSH session without a terminal is open, including its machine traffic: a regular cadence (a page reloading itself, a poller) or a forward to a service whose own signals decide",
  },
});

export function isHumanSignal(signal: SignalName): boolean {
  return SIGNAL_TABLE[signal].kind === "human";
}

export function isBackgroundSignal(signal: SignalName): boolean {
  return SIGNAL_TABLE[signal].kind === "background";
}

export function isOutputSignal(signal: SignalName): boolean {
  return SIGNAL_TABLE[signal].kind === "output";
}

function isSignalName(name: string): name is SignalName {
  return Object.hasOwn(SIGNAL_TABLE, name);
}

/** Vetoes that are background work (their signal's row says so): bounded by unattended-max. Leases, inhibitors and blind sources are not. */
export function isBackgroundVeto(kind: VetoKind): boolean {
  return isSignalName(kind) && isBackgroundSignal(kind);
}

/** The workstation_signal_active family of a reading's signal or a veto's kind. */
export function familyOf(name: string): SignalFamily | undefined {
  if (isSignalName(name)) return SIGNAL_TABLE[name].family;
  return Object.hasOwn(VETO_FAMILIES, name) ? VETO_FAMILIES[name as VetoKind] : undefined;
}

/**
 * Whether a reading shows that a person came back: after a stop, only human evidence would
 * have started the VM again (background work of a recorded VM that was never stopped does not).
 */
export function showsPersonAfter(reading: { signal: SignalName; atMs: number }, afterMs: number): boolean {
  return isHumanSignal(reading.signal) && reading.atMs > afterMs;
}
