import type { SealFacts } from "./facts.js";
import { macMatchedInterfaces } from "./netplan.js";
import { REGENERATE_UNIT_TEXT } from "./ssh.js";
import { errorMessage } from "@ws/protocol";

/** One property a sealed image must have, checked on facts gathered after sealing. */
export interface SealCheck {
  id:
    | "machine-id"
    | "dbus-machine-id"
    | "ssh-host-keys"
    | "ssh-host-key-regeneration"
    | "netplan-mac-match"
    | "cloud-init-state"
    | "agent-state";
  ok: boolean;
  detail: string;
}

/** Pure: what clones would inherit that they must not. Logs and tmp are not checked: a live system writes them again at once. */
export function verifySeal(facts: SealFacts): SealCheck[] {
  const checks: SealCheck[] = [];
  const machineId = facts.machineId.content;
  checks.push({
    id: "machine-id",
    ok: machineId?.trim() === "uninitialized",
    detail:
      machineId === null
        ? "/etc/machine-id is missing or not a file"
        : `/etc/machine-id reads ${JSON.stringify(machineId.trim())}`,
  });
  const dbus = facts.dbusMachineId.entry;
  checks.push({
    id: "dbus-machine-id",
    ok: dbus === null || dbus.kind === "symlink",
    detail:
      dbus === null
        ? "/var/lib/dbus/machine-id is gone"
        : dbus.kind === "symlink"
          ? `/var/lib/dbus/machine-id links to ${facts.dbusMachineId.linkTarget}`
          : "/var/lib/dbus/machine-id is still there",
  });
  checks.push({
    id: "ssh-host-keys",
    ok: facts.sshHostKeys.length === 0,
    detail:
      facts.sshHostKeys.length === 0 ? "no SSH host keys" : `left: ${facts.sshHostKeys.map((k) => k.path).join(", ")}`,
  });
  const regeneration = facts.keyRegeneration;
  const ours = regeneration.ourUnitText === REGENERATE_UNIT_TEXT && regeneration.ourUnitLinked;
  const others = regeneration.units.filter((unit) => unit.enabled).map((unit) => unit.path);
  checks.push({
    id: "ssh-host-key-regeneration",
    ok: ours || others.length > 0,
    detail: ours
      ? "ws-regenerate-ssh-host-keys.service is installed and enabled"
      : others.length > 0
        ? `enabled: ${others.join(", ")}`
        : "no enabled unit makes host keys on first boot",
  });
  const macMatches: string[] = [];
  for (const file of facts.netplan) {
    if (file.text === null) {
      macMatches.push(`${file.path} (unreadable: ${file.error})`);
      continue;
    }
    try {
      for (const id of macMatchedInterfaces(file.text)) macMatches.push(`${file.path}: ${id}`);
    } catch (error) {
      macMatches.push(`${file.path} (does not parse: ${errorMessage(error)})`);
    }
  }
  checks.push({
    id: "netplan-mac-match",
    ok: macMatches.length === 0,
    detail:
      macMatches.length === 0
        ? `no netplan file matches by MAC (${facts.netplan.length} checked)`
        : `left: ${macMatches.join(", ")}`,
  });
  const state = facts.cloudInit.state;
  checks.push({
    id: "cloud-init-state",
    ok: state.length === 0,
    detail:
      state.length === 0
        ? "no cloud-init instance state in /var/lib/cloud"
        : `left: ${state.map((e) => e.path).join(", ")}`,
  });
  checks.push({
    id: "agent-state",
    ok: facts.agentState.length === 0,
    detail:
      facts.agentState.length === 0 ? "no ws-agent state" : `left: ${facts.agentState.map((e) => e.path).join(", ")}`,
  });
  return checks;
}
