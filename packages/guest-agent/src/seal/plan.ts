import { cleanArguments, parseCleanHelp } from "./cloud-init.js";
import { AGENT_CONFIG, AGENT_STATE_DIR, type SealFacts } from "./facts.js";
import { rewriteMacMatches } from "./netplan.js";
import type { ImageEntry } from "./rootfs.js";
import { REGENERATE_UNIT_LINK, REGENERATE_UNIT_PATH, REGENERATE_UNIT_TEXT } from "./ssh.js";
import { errorMessage } from "@ws/protocol";

/** One change to the tree; paths are absolute inside the image. Each is safe to repeat. */
export type SealAction =
  | { kind: "run"; argv: string[] }
  | { kind: "remove"; path: string }
  | { kind: "truncate"; path: string }
  | { kind: "write"; path: string; content: string; mode: number; why: string }
  | { kind: "symlink"; path: string; target: string };

export type SealOperationId =
  | "cloud-init-clean"
  | "cloud-init-state"
  | "cloud-init-logs"
  | "cloud-init-generated-config"
  | "machine-id"
  | "netplan-mac-match"
  | "ssh-host-keys"
  | "ssh-host-key-regeneration"
  | "agent-state"
  | "logfiles"
  | "journal"
  | "shell-history"
  | "tmp-files"
  | "random-seed"
  | "dhcp-client-state";

export interface SealOperation {
  id: SealOperationId;
  title: string;
  actions: SealAction[];
  /** Why the operation does not apply here (cloud-init not installed...); it then has no actions. */
  skipped: string | null;
  /** Problems found while planning: the operation is reported failed. */
  problems: string[];
  /** Facts worth knowing that need no action (a warning, what was kept and why). */
  notes: string[];
}

function operation(
  id: SealOperationId,
  title: string,
  parts: Partial<Omit<SealOperation, "id" | "title">> = {},
): SealOperation {
  return { id, title, actions: [], skipped: null, problems: [], notes: [], ...parts };
}

const removeAll = (entries: ImageEntry[]): SealAction[] =>
  entries.map((entry) => ({ kind: "remove", path: entry.path }));

export function describeAction(action: SealAction): string {
  switch (action.kind) {
    case "run":
      return `run ${action.argv.join(" ")}`;
    case "remove":
      return `remove ${action.path}`;
    case "truncate":
      return `truncate ${action.path}`;
    case "write":
      return `write ${action.path} (${action.why})`;
    case "symlink":
      return `link ${action.path} → ${action.target}`;
  }
}

/**
 * Decides what sealing `facts.root` takes. Pure. The order matters where one step's files are
 * another's: cloud-init's generated network config is removed (cloud-init writes a new one on
 * the clone's first boot), other netplan files are rewritten.
 */
export function planSeal(facts: SealFacts): SealOperation[] {
  const ci = facts.cloudInit;
  // Without cloud-init writing a new network config on first boot, the image's must stay.
  const keepNetworkConfig = !ci.installed || ci.disabled || ci.settings.networkConfigDisabled;
  const generatedNetwork = keepNetworkConfig ? [] : ci.generatedNetwork;
  return [
    cloudInitCleanOperation(facts, keepNetworkConfig),
    operation("cloud-init-state", "cloud-init instance state (/var/lib/cloud, seed kept)", {
      actions: removeAll(ci.state),
      notes: ci.installed ? [] : ["cloud-init is not installed; any state it left is removed anyway"],
    }),
    operation("cloud-init-logs", "cloud-init logs", { actions: removeAll(ci.logs) }),
    generatedConfigOperation(ci, keepNetworkConfig, generatedNetwork),
    machineIdOperation(facts),
    netplanOperation(facts, new Set(generatedNetwork.map((e) => e.path))),
    operation("ssh-host-keys", "SSH host keys", { actions: removeAll(facts.sshHostKeys) }),
    hostKeyRegenerationOperation(facts),
    ...stateAndLogOperations(facts),
  ];
}

/** `cloud-init clean`, or why it is not run (not installed, an offline tree, no --help). */
function cloudInitCleanOperation(facts: SealFacts, keepNetworkConfig: boolean): SealOperation {
  const ci = facts.cloudInit;
  if (!ci.installed)
    return operation("cloud-init-clean", "cloud-init clean", { skipped: "cloud-init is not installed in this image" });
  if (!facts.live) {
    return operation("cloud-init-clean", "cloud-init clean", {
      skipped:
        "an offline tree (--root): cloud-init clean acts on the running system only, so its work is done by hand in the next operations",
      notes:
        ci.cleanHooks.length > 0
          ? [
              `the image has clean hooks cloud-init clean would run, not run from outside: ${ci.cleanHooks.map((h) => h.path).join(", ")}`,
            ]
          : [],
    });
  }
  if (ci.cleanHelp === null) {
    return operation("cloud-init-clean", "cloud-init clean", {
      problems: [ci.cleanHelpError ?? "cloud-init clean --help gave nothing"],
    });
  }
  const flags = parseCleanHelp(ci.cleanHelp);
  const args = cleanArguments(flags, keepNetworkConfig);
  const missing = [!flags.logs && "--logs", !flags.machineId && "--machine-id", !flags.configs && "--configs"].filter(
    Boolean,
  );
  return operation("cloud-init-clean", "cloud-init clean", {
    actions: [{ kind: "run", argv: ["/usr/bin/cloud-init", ...args] }],
    notes: missing.length > 0 ? [`this cloud-init has no ${missing.join(", ")}: the same is done by hand below`] : [],
  });
}

/** The network and sshd config cloud-init generated: removed, or the network's kept and why. */
function generatedConfigOperation(
  ci: SealFacts["cloudInit"],
  keepNetworkConfig: boolean,
  generatedNetwork: SealFacts["cloudInit"]["generatedNetwork"],
): SealOperation {
  const generatedNotes: string[] = [];
  if (keepNetworkConfig && ci.generatedNetwork.length > 0) {
    const why = !ci.installed
      ? "cloud-init is not installed"
      : ci.disabled
        ? "cloud-init is disabled (/etc/cloud/cloud-init.disabled)"
        : "cloud-init's network config is disabled (network: {config: disabled})";
    generatedNotes.push(
      `kept ${ci.generatedNetwork.map((e) => e.path).join(", ")}: ${why}, so nothing would write a new one; its MAC match is rewritten instead`,
    );
  }
  return operation("cloud-init-generated-config", "network and sshd config cloud-init generated", {
    actions: removeAll([...generatedNetwork, ...(ci.installed ? ci.generatedSsh : [])]),
    notes: generatedNotes,
  });
}

/** /etc/machine-id made "uninitialized", D-Bus's copy removed (a symlink to it kept). */
function machineIdOperation(facts: SealFacts): SealOperation {
  const machineIdActions: SealAction[] = [];
  if (facts.machineId.content !== "uninitialized\n") {
    machineIdActions.push({
      kind: "write",
      path: "/etc/machine-id",
      content: "uninitialized\n",
      mode: 0o444,
      why: "uninitialized: systemd makes a new one on first boot",
    });
  }
  const dbus = facts.dbusMachineId;
  const machineIdNotes: string[] = [];
  if (dbus.entry?.kind === "symlink")
    machineIdNotes.push(`kept /var/lib/dbus/machine-id: a symlink to ${dbus.linkTarget ?? "?"}`);
  else if (dbus.entry) machineIdActions.push({ kind: "remove", path: "/var/lib/dbus/machine-id" });
  return operation("machine-id", "machine-id", { actions: machineIdActions, notes: machineIdNotes });
}

/** Netplan files not removed above, their interfaces' MAC matches rewritten. */
function netplanOperation(facts: SealFacts, removedNetwork: Set<string>): SealOperation {
  const netplan = operation("netplan-mac-match", "netplan interfaces matched by MAC address");
  for (const file of facts.netplan) {
    if (removedNetwork.has(file.path)) continue;
    if (file.text === null) {
      netplan.problems.push(`cannot read ${file.path}: ${file.error ?? "unknown error"}`);
      continue;
    }
    try {
      const rewrite = rewriteMacMatches(file.text);
      netplan.notes.push(...rewrite.warnings.map((w) => `${file.path}: ${w}`));
      netplan.problems.push(...rewrite.problems.map((p) => `${file.path}: ${p}`));
      if (rewrite.changed) {
        netplan.actions.push({
          kind: "write",
          path: file.path,
          content: rewrite.text,
          mode: file.mode,
          why: rewrite.changes.join("; "),
        });
      }
    } catch (error) {
      netplan.problems.push(`${file.path} is not YAML netplan can read, left as it is: ${errorMessage(error)}`);
    }
  }
  return netplan;
}

/** A unit that makes host keys on a boot that finds none, unless another unit already does. */
function hostKeyRegenerationOperation(facts: SealFacts): SealOperation {
  const ci = facts.cloudInit;
  const regeneration = facts.keyRegeneration;
  const regenerationNotes: string[] = [];
  const otherUnits = regeneration.units.filter((unit) => unit.enabled);
  if (ci.installed && ci.settings.regeneratesHostKeys && !ci.disabled) {
    regenerationNotes.push("cloud-init's ssh module also makes new host keys when the clone boots as a new instance");
  }
  const regenerationActions: SealAction[] = [];
  if (otherUnits.length > 0) {
    regenerationNotes.push(`already ensured by ${otherUnits.map((u) => u.path).join(", ")}`);
  } else {
    if (regeneration.ourUnitText !== REGENERATE_UNIT_TEXT) {
      regenerationActions.push({
        kind: "write",
        path: REGENERATE_UNIT_PATH,
        content: REGENERATE_UNIT_TEXT,
        mode: 0o644,
        why: "runs ssh-keygen -A on a boot that finds no host keys",
      });
    }
    if (!regeneration.ourUnitLinked)
      regenerationActions.push({ kind: "symlink", path: REGENERATE_UNIT_LINK, target: REGENERATE_UNIT_PATH });
  }
  return operation("ssh-host-key-regeneration", "SSH host keys made anew on first boot", {
    actions: regenerationActions,
    notes: regenerationNotes,
  });
}

/** The agent's state, logs, journal, histories, temporary files, seeds and DHCP leases. */
function stateAndLogOperations(facts: SealFacts): SealOperation[] {
  return [
    operation("agent-state", `ws-agent state (${AGENT_STATE_DIR}: leases, audit, identity)`, {
      actions: removeAll(facts.agentState),
      notes: facts.agentConfig
        ? [
            `kept ${AGENT_CONFIG}: cloud-init writes each VM's own; if it names this VM, clones report as it until theirs is written`,
          ]
        : [],
    }),
    operation("logfiles", "log files in /var/log (truncated; rotated ones removed)", {
      actions: [
        ...facts.logs.truncate.map((e): SealAction => ({ kind: "truncate", path: e.path })),
        ...removeAll(facts.logs.remove),
      ],
    }),
    operation("journal", "systemd journal files (/var/log/journal)", { actions: removeAll(facts.journal) }),
    operation("shell-history", "shell and tool histories of root and /home/*", { actions: removeAll(facts.histories) }),
    operation("tmp-files", "/tmp and /var/tmp", { actions: removeAll(facts.tmp) }),
    operation("random-seed", "random seed and systemd credential secret", { actions: removeAll(facts.randomSeeds) }),
    operation("dhcp-client-state", "DHCP client leases", { actions: removeAll(facts.dhcpLeases) }),
  ];
}
