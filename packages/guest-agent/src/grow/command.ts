import { spawnRunner, type CommandRunner } from "./exec.js";
import { executeGrow, growExitCode, systemProbe, type GrowProbe, type MountResult } from "./execute.js";
import { gatherGrowFacts } from "./facts.js";
import { planGrow, type MountPlan } from "./plan.js";
import { formatGrowJson, formatGrowText } from "./report.js";
import { findTools, type ToolPaths } from "./tools.js";
import { errorMessage, parseCommandLine } from "@ws/protocol";

export const GROW_HELP = `Usage: ws-agent grow [--mount PATH ...] [--dry-run] [--json]

Grows the partition (when it is the last one on its disk), the LVM physical and logical
volume, and the filesystem (ext4, xfs, btrfs) under each mount, after the disk was enlarged
(a PVC resize with KubeVirt's ExpandDisks). Never shrinks, never moves a partition, never
touches a partition that is not the last one. Nothing to grow is success.

Options:
      --mount PATH  A mount to grow (repeatable; default /)
      --dry-run     Print what would be done; change nothing
      --json        Print the report as JSON
  -h, --help        Show this help

Exit status: 0 grown or nothing to grow, 1 something failed or was refused, 2 usage error.
`;

export interface GrowIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env?: Record<string, string | undefined>;
}

export interface GrowOptions {
  mounts: string[];
  dryRun: boolean;
  env: Record<string, string | undefined>;
  procRoot?: string;
  sysRoot?: string;
  devRoot?: string;
  /** Which tools exist; found on PATH when absent (tests hide growpart to take the sfdisk path). */
  tools?: ToolPaths;
  run?: CommandRunner;
  probe?: GrowProbe;
}

export interface GrowOutcome {
  plans: MountPlan[];
  results: MountResult[];
  exitCode: 0 | 1;
}

/** Facts, plan, then (unless a dry run) the steps. The library entry tests and the CLI share. */
export async function runGrow(options: GrowOptions): Promise<GrowOutcome> {
  const run = options.run ?? spawnRunner(options.env);
  const tools = options.tools ?? (await findTools(options.env.PATH));
  const sysRoot = options.sysRoot ?? "/sys";
  const facts = await gatherGrowFacts(
    { procRoot: options.procRoot ?? "/proc", sysRoot, devRoot: options.devRoot ?? "/dev", tools, run },
    options.mounts,
  );
  const plans = planGrow(facts);
  const results = await executeGrow(plans, {
    dryRun: options.dryRun,
    run,
    probe: options.probe ?? systemProbe(sysRoot, tools, run),
  });
  return { plans, results, exitCode: growExitCode(results) };
}

export async function growCommand(argv: string[], io: GrowIo): Promise<number> {
  let values: { mount?: string[]; "dry-run"?: boolean; json?: boolean; help?: boolean };
  try {
    ({ values } = parseCommandLine(argv, {
      help: GROW_HELP,
      options: {
        mount: { type: "string", multiple: true },
        "dry-run": { type: "boolean" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (error) {
    io.stderr.write(`ws-agent grow: ${errorMessage(error)}\n\n${GROW_HELP}`);
    return 2;
  }
  if (values.help) {
    io.stdout.write(GROW_HELP);
    return 0;
  }
  const mounts = values.mount ?? ["/"];
  const bad = mounts.find((mount) => !mount.startsWith("/"));
  if (bad !== undefined) {
    io.stderr.write(`ws-agent grow: --mount needs an absolute path, got ${JSON.stringify(bad)}\n`);
    return 2;
  }
  const dryRun = values["dry-run"] === true;
  let outcome: GrowOutcome;
  try {
    outcome = await runGrow({ mounts, dryRun, env: io.env ?? process.env });
  } catch (error) {
    io.stderr.write(`ws-agent grow: ${errorMessage(error)}\n`);
    return 1;
  }
  io.stdout.write(
    values.json ? formatGrowJson(outcome.results, dryRun, outcome.exitCode) : formatGrowText(outcome.results, dryRun),
  );
  return outcome.exitCode;
}
