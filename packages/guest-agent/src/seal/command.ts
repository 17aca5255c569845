import { stat } from "node:fs/promises";
import path from "node:path";
import { describeFailure, spawnRunner, type CommandRunner } from "../grow/exec.js";
import { executeSeal, plannedResults } from "./execute.js";
import { gatherSealFacts } from "./facts.js";
import { planSeal } from "./plan.js";
import { formatSealJson, formatSealText, type SealReport } from "./report.js";
import { verifySeal } from "./verify.js";
import { errorMessage, parseCommandLine } from "@ws/protocol";

export const SEAL_HELP = `Usage: ws-agent seal [--root DIR] [--dry-run] [--yes] [--poweroff] [--json]

Prepares this machine (or the offline tree at --root) to become a golden image that is
cloned: cloud-init clean (or the same by hand), machine-id set to "uninitialized", netplan
MAC matches rewritten to match by name, SSH host keys removed and regenerated on first
boot, ws-agent state, logs, shell histories, tmp files, random seed and DHCP leases removed.
Then verifies the result. Every step is safe to repeat.

Options:
      --root DIR   Seal the tree at DIR (a mounted image) instead of the running system
      --dry-run    Print what would be done; change nothing
      --yes        Really do it (required unless --dry-run)
      --poweroff   Power off when sealing succeeded (the image must not boot again
                   before it is cloned); not with --root
      --json       Print the report as JSON
  -h, --help       Show this help

Exit status: 0 sealed (or a clean dry run), 1 something failed or was left behind,
2 usage error or refused for want of --yes.
`;

const REFUSAL = `ws-agent seal: refusing without --yes.
Sealing changes the system for good: it removes the SSH host keys, resets machine-id,
rewrites netplan files, and clears cloud-init state, logs, shell histories and /tmp.
Run 'ws-agent seal --dry-run' to see exactly what it would do, then again with --yes.
`;

export interface SealIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env?: Record<string, string | undefined>;
}

export interface SealOptions {
  root: string;
  dryRun: boolean;
  poweroff: boolean;
  run: CommandRunner;
  /** Called with the finished report just before powering off: the last moment it can still be read. */
  beforePoweroff?: (report: SealReport) => Promise<void>;
}

/** Facts, plan, act, re-gather, verify, and power off if asked and sealed. The library entry. */
export async function runSeal(options: SealOptions): Promise<SealReport> {
  const facts = await gatherSealFacts(options.root, options.run);
  const operations = planSeal(facts);
  const base = {
    root: options.root,
    live: facts.live,
    dryRun: options.dryRun,
    poweroff: "not requested" as SealReport["poweroff"],
  };
  if (options.dryRun) {
    const planned = plannedResults(operations);
    return {
      ...base,
      operations: planned,
      verification: null,
      ok: planned.every((operation) => operation.status !== "failed"),
    };
  }
  const results = await executeSeal(options.root, operations, options.run);
  const verification = verifySeal(await gatherSealFacts(options.root, options.run));
  const ok = results.every((operation) => operation.status !== "failed") && verification.every((check) => check.ok);
  const report: SealReport = { ...base, operations: results, verification, ok };
  if (!options.poweroff) return report;
  if (!ok) return { ...report, poweroff: "not done: sealing is incomplete" };
  await options.beforePoweroff?.({ ...report, poweroff: "requested" });
  const argv = ["systemctl", "poweroff"];
  const result = await options.run(argv);
  return result.exitCode === 0
    ? { ...report, poweroff: "done" }
    : { ...report, poweroff: "failed", poweroffError: describeFailure(argv, result), ok: false };
}

export async function sealCommand(argv: string[], io: SealIo): Promise<number> {
  let values: { root?: string; "dry-run"?: boolean; yes?: boolean; poweroff?: boolean; json?: boolean; help?: boolean };
  try {
    ({ values } = parseCommandLine(argv, {
      help: SEAL_HELP,
      options: {
        root: { type: "string" },
        "dry-run": { type: "boolean" },
        yes: { type: "boolean" },
        poweroff: { type: "boolean" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (error) {
    io.stderr.write(`ws-agent seal: ${errorMessage(error)}\n\n${SEAL_HELP}`);
    return 2;
  }
  if (values.help) {
    io.stdout.write(SEAL_HELP);
    return 0;
  }
  const root = path.resolve(values.root ?? "/");
  const dryRun = values["dry-run"] === true;
  const poweroff = values.poweroff === true;
  const usage = (message: string) => {
    io.stderr.write(`ws-agent seal: ${message}\n`);
    return 2;
  };
  if (values.root !== undefined && values.root.trim() === "") return usage("--root needs a directory");
  try {
    if (!(await stat(root)).isDirectory()) return usage(`--root ${values.root}: not a directory`);
  } catch (error) {
    return usage(`--root ${values.root}: ${errorMessage(error)}`);
  }
  if (poweroff && root !== "/") return usage("--poweroff powers off the running system; it does not go with --root");
  if (poweroff && dryRun) return usage("--poweroff does not go with --dry-run");
  if (!dryRun && !values.yes) {
    io.stderr.write(REFUSAL);
    return 2;
  }
  let report: SealReport;
  const format = (r: SealReport) => (values.json ? formatSealJson(r) : formatSealText(r));
  let printed = false;
  try {
    report = await runSeal({
      root,
      dryRun,
      poweroff,
      run: spawnRunner(io.env ?? process.env),
      // The power-off ends this process and any SSH session it runs in: print the summary first.
      beforePoweroff: (sealed) =>
        new Promise<void>((resolve) => {
          printed = true;
          io.stdout.write(format(sealed), () => resolve());
        }),
    });
  } catch (error) {
    io.stderr.write(`ws-agent seal: ${errorMessage(error)}\n`);
    return 1;
  }
  if (!printed) io.stdout.write(format(report));
  else if (report.poweroff === "failed")
    io.stderr.write(`ws-agent seal: power-off failed: ${report.poweroffError ?? "unknown error"}\n`);
  return report.ok ? 0 : 1;
}
